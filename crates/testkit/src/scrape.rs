//! Scraping the broker's Prometheus endpoint the way Prometheus does: one HTTP/1.1 GET of
//! `/metrics` over a fresh connection, the answer split into status line, content type and body.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `GET /metrics`: status line, content type and body.
pub async fn scrape(addr: SocketAddr) -> (String, String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("request sent");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("response read");
    let text = String::from_utf8(raw).expect("UTF-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("header and body");
    let status = head.lines().next().unwrap_or_default().to_owned();
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type:")
                .map(|v| v.trim().to_owned())
        })
        .unwrap_or_default();
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    (status, content_type, body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).expect("chunk size");
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}
