//! TLS listener tests: a rustls client (trusting a freshly generated self-signed certificate)
//! and a plaintext client share one port in permissive mode; enforcing mode refuses plaintext.
//! Synchronization is by responses; `tokio::time::timeout` only guards against hangs.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use comet_protocol::RemotingCommand;
use comet_protocol::frame::{decode_frame, encode_to_bytes};
use comet_remoting::{
    Channel, ClientConfig, ClientTlsConfig, RemotingClient, RemotingError, RemotingServer,
    RequestProcessor, ServerConfig, ServerHandle, TlsConfig, TlsMode, TrustRoots,
};
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};

const SUCCESS: i32 = 0;
const ECHO: i32 = 100;
/// Hang guard for anything that should complete promptly (generous for a loaded CI box).
const GUARD: Duration = Duration::from_secs(30);
const RPC_TIMEOUT: Duration = Duration::from_secs(3);

async fn guard<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(GUARD, fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what} did not complete within {GUARD:?}"),
    }
}

struct Echo;

impl RequestProcessor for Echo {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        async move {
            let mut rsp = RemotingCommand::response(SUCCESS, Some("echo".to_owned()));
            rsp.ext_fields = request.ext_fields;
            rsp.body = request.body;
            Some(rsp)
        }
        .boxed()
    }
}

/// A self-signed certificate for `localhost`/127.0.0.1 written as PEM files.
struct TestCert {
    _dir: tempfile::TempDir,
    cert_path: std::path::PathBuf,
    key_path: std::path::PathBuf,
    der: CertificateDer<'static>,
}

fn make_cert() -> TestCert {
    let generated =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("generate certificate");
    let dir = tempfile::tempdir().expect("temp dir");
    let cert_path = dir.path().join("server.pem");
    let key_path = dir.path().join("server.key");
    std::fs::write(&cert_path, generated.cert.pem()).expect("write cert");
    std::fs::write(&key_path, generated.signing_key.serialize_pem()).expect("write key");
    TestCert {
        der: generated.cert.der().clone(),
        _dir: dir,
        cert_path,
        key_path,
    }
}

async fn start(mode: TlsMode, cert: &TestCert) -> (ServerHandle, String) {
    let config = ServerConfig {
        tls: Some(TlsConfig::new(mode, &cert.cert_path, &cert.key_path)),
        ..ServerConfig::new("127.0.0.1:0")
    };
    let server = RemotingServer::bind(config).await.expect("bind");
    server.register(ECHO, Arc::new(Echo));
    let addr = server.local_addr().to_string();
    (server.start(), addr)
}

fn connector(trusted: &CertificateDer<'static>) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(trusted.clone()).expect("add root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

fn echo_request(tag: &str) -> RemotingCommand {
    let mut req = RemotingCommand::request(ECHO).with_body(Bytes::from(format!("body-{tag}")));
    req.opaque = 7;
    req.ext_mut().insert("tag", tag);
    req
}

/// Writes one request frame and reads one response frame over any stream.
async fn round_trip<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    request: &RemotingCommand,
) -> RemotingCommand {
    let frame = encode_to_bytes(request).expect("encode");
    stream.write_all(&frame).await.expect("write");
    stream.flush().await.expect("flush");
    let mut buf = BytesMut::new();
    loop {
        if let Some(cmd) = decode_frame(&mut buf).expect("decode") {
            return cmd;
        }
        let n = stream.read_buf(&mut buf).await.expect("read");
        assert!(n > 0, "connection closed before the response");
    }
}

async fn tls_connect(
    addr: &str,
    trusted: &CertificateDer<'static>,
) -> std::io::Result<impl AsyncRead + AsyncWrite + Unpin> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").expect("server name");
    connector(trusted).connect(name, tcp).await
}

#[tokio::test]
async fn permissive_mode_serves_tls_and_plaintext_on_one_port() {
    let cert = make_cert();
    let (server, addr) = start(TlsMode::Permissive, &cert).await;

    let mut tls = guard("TLS handshake", tls_connect(&addr, &cert.der))
        .await
        .expect("TLS connect");
    for tag in ["first", "second"] {
        let rsp = guard("TLS echo", round_trip(&mut tls, &echo_request(tag))).await;
        assert_eq!(rsp.code, SUCCESS);
        assert_eq!(rsp.opaque, 7);
        assert!(rsp.is_response());
        assert_eq!(rsp.ext("tag"), Some(tag));
        assert_eq!(rsp.body.as_deref(), Some(format!("body-{tag}").as_bytes()));
    }

    // Plaintext through the ordinary client, on the same port, while the TLS session is open.
    let client = RemotingClient::new(ClientConfig::default());
    let rsp = guard(
        "plaintext echo",
        client.invoke(&addr, echo_request("plain"), RPC_TIMEOUT),
    )
    .await
    .expect("plaintext invoke");
    assert_eq!(rsp.code, SUCCESS);
    assert_eq!(rsp.ext("tag"), Some("plain"));

    // The TLS session still works after the plaintext one.
    let rsp = guard(
        "TLS echo again",
        round_trip(&mut tls, &echo_request("third")),
    )
    .await;
    assert_eq!(rsp.ext("tag"), Some("third"));
    server.shutdown().await;
}

#[tokio::test]
async fn enforcing_mode_refuses_plaintext_but_serves_tls() {
    let cert = make_cert();
    let (server, addr) = start(TlsMode::Enforcing, &cert).await;

    let client = RemotingClient::new(ClientConfig::default());
    let refused = guard(
        "plaintext refused",
        client.invoke(&addr, echo_request("plain"), RPC_TIMEOUT),
    )
    .await;
    assert!(
        refused.is_err(),
        "plaintext must not be served: {refused:?}"
    );

    let mut tls = guard("TLS handshake", tls_connect(&addr, &cert.der))
        .await
        .expect("TLS connect");
    let rsp = guard("TLS echo", round_trip(&mut tls, &echo_request("tls"))).await;
    assert_eq!(rsp.ext("tag"), Some("tls"));
    server.shutdown().await;
}

#[tokio::test]
async fn untrusted_client_fails_the_handshake_and_the_server_stays_up() {
    let cert = make_cert();
    let other = make_cert();
    let (server, addr) = start(TlsMode::Permissive, &cert).await;
    let failed = guard(
        "handshake with the wrong root",
        tls_connect(&addr, &other.der),
    )
    .await;
    assert!(failed.is_err(), "a client trusting another root must fail");

    let mut tls = guard("TLS handshake", tls_connect(&addr, &cert.der))
        .await
        .expect("TLS connect");
    let rsp = guard("TLS echo", round_trip(&mut tls, &echo_request("after"))).await;
    assert_eq!(rsp.ext("tag"), Some("after"));
    server.shutdown().await;
}

#[tokio::test]
async fn bad_key_file_fails_bind() {
    let cert = make_cert();
    let config = ServerConfig {
        tls: Some(TlsConfig::new(
            TlsMode::Permissive,
            &cert.cert_path,
            &cert.cert_path,
        )),
        ..ServerConfig::new("127.0.0.1:0")
    };
    match RemotingServer::bind(config).await {
        Err(e) => assert!(e.to_string().contains("TLS"), "{e}"),
        Ok(_) => panic!("a certificate given as the key must fail"),
    }
}

fn tls_client(tls: ClientTlsConfig) -> RemotingClient {
    RemotingClient::try_new(ClientConfig {
        tls: Some(tls),
        ..ClientConfig::default()
    })
    .expect("client TLS setup")
}

#[tokio::test]
async fn remoting_client_speaks_tls_to_an_enforcing_server() {
    let cert = make_cert();
    let (server, addr) = start(TlsMode::Enforcing, &cert).await;

    // Trusting the server certificate from a PEM file; the name checked is the dialed IP.
    let trusting = tls_client(ClientTlsConfig {
        trust: TrustRoots::PemFile(cert.cert_path.clone()),
        ..ClientTlsConfig::default()
    });
    for tag in ["a", "b"] {
        let rsp = guard(
            "TLS invoke",
            trusting.invoke(&addr, echo_request(tag), RPC_TIMEOUT),
        )
        .await
        .expect("TLS invoke");
        assert_eq!(rsp.code, SUCCESS);
        assert_eq!(rsp.ext("tag"), Some(tag));
    }
    // An explicit server name works too (the certificate names localhost).
    let named = tls_client(ClientTlsConfig {
        server_name: Some("localhost".to_owned()),
        trust: TrustRoots::PemFile(cert.cert_path.clone()),
        ..ClientTlsConfig::default()
    });
    let rsp = guard(
        "named TLS invoke",
        named.invoke(&addr, echo_request("named"), RPC_TIMEOUT),
    )
    .await
    .expect("named TLS invoke");
    assert_eq!(rsp.ext("tag"), Some("named"));

    // Test mode: any certificate is accepted.
    let insecure = tls_client(ClientTlsConfig {
        insecure_skip_verify: true,
        ..ClientTlsConfig::default()
    });
    let rsp = guard(
        "insecure TLS invoke",
        insecure.invoke(&addr, echo_request("insecure"), RPC_TIMEOUT),
    )
    .await
    .expect("insecure TLS invoke");
    assert_eq!(rsp.ext("tag"), Some("insecure"));

    // Trusting another root, or asking for a name the certificate lacks, fails the connect.
    let other = make_cert();
    let wrong_root = tls_client(ClientTlsConfig {
        trust: TrustRoots::PemFile(other.cert_path.clone()),
        ..ClientTlsConfig::default()
    });
    let failed = guard(
        "wrong root",
        wrong_root.invoke(&addr, echo_request("x"), RPC_TIMEOUT),
    )
    .await;
    assert!(
        matches!(failed, Err(RemotingError::ConnectFailed { .. })),
        "{failed:?}"
    );
    let wrong_name = tls_client(ClientTlsConfig {
        server_name: Some("broker.example".to_owned()),
        trust: TrustRoots::PemFile(cert.cert_path.clone()),
        ..ClientTlsConfig::default()
    });
    let failed = guard(
        "wrong name",
        wrong_name.invoke(&addr, echo_request("x"), RPC_TIMEOUT),
    )
    .await;
    assert!(
        matches!(failed, Err(RemotingError::ConnectFailed { .. })),
        "{failed:?}"
    );

    // A TLS client against a plaintext-only server fails instead of hanging.
    let plain_server = RemotingServer::bind(ServerConfig::new("127.0.0.1:0"))
        .await
        .expect("bind");
    plain_server.register(ECHO, Arc::new(Echo));
    let plain_addr = plain_server.local_addr().to_string();
    let plain_server = plain_server.start();
    let failed = guard(
        "TLS to plaintext",
        insecure.invoke(&plain_addr, echo_request("x"), RPC_TIMEOUT),
    )
    .await;
    assert!(failed.is_err(), "{failed:?}");

    for client in [trusting, named, insecure, wrong_root, wrong_name] {
        client.shutdown().await;
    }
    plain_server.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn unreadable_trust_file_fails_client_creation() {
    let config = ClientConfig {
        tls: Some(ClientTlsConfig {
            trust: TrustRoots::PemFile("/nonexistent/ca.pem".into()),
            ..ClientTlsConfig::default()
        }),
        ..ClientConfig::default()
    };
    assert!(matches!(
        RemotingClient::try_new(config.clone()),
        Err(RemotingError::Tls { .. })
    ));
    // The infallible constructor reports the same error on every call.
    let client = RemotingClient::new(config);
    let failed = client
        .invoke("127.0.0.1:1", echo_request("x"), RPC_TIMEOUT)
        .await;
    assert!(
        matches!(failed, Err(RemotingError::Tls { .. })),
        "{failed:?}"
    );
}
