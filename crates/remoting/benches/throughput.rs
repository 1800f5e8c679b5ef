//! Request/response throughput over one multiplexed connection on loopback.
//!
//! Run with `cargo bench -p comet-remoting --bench throughput`. Prints requests per second for a
//! few body sizes and concurrency levels; the server echoes the body back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use comet_protocol::RemotingCommand;
use comet_remoting::{
    Channel, ClientConfig, RemotingClient, RemotingServer, RequestProcessor, ServerConfig,
};
use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};

const ECHO: i32 = 100;
const REQUESTS: usize = 100_000;
const TIMEOUT: Duration = Duration::from_secs(30);

struct Echo;

impl RequestProcessor for Echo {
    fn process(
        &self,
        _: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        async move {
            let mut rsp = RemotingCommand::response(0, None);
            rsp.body = request.body;
            Some(rsp)
        }
        .boxed()
    }
}

async fn run(client: &RemotingClient, addr: &str, body: Bytes, concurrency: usize) -> f64 {
    let start = Instant::now();
    let failures = stream::iter(0..REQUESTS)
        .map(|_| {
            let mut req = RemotingCommand::request(ECHO).with_body(body.clone());
            req.ext_mut().insert("topic", "BenchTopic");
            client.invoke(addr, req, TIMEOUT)
        })
        .buffer_unordered(concurrency)
        .filter(|r| futures::future::ready(r.is_err()))
        .count()
        .await;
    assert_eq!(failures, 0, "requests failed during the benchmark");
    REQUESTS as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot build runtime: {e}");
            return;
        }
    };
    runtime.block_on(async {
        let server = match RemotingServer::bind(ServerConfig::new("127.0.0.1:0")).await {
            Ok(server) => server,
            Err(e) => {
                eprintln!("cannot bind: {e}");
                return;
            }
        };
        server.register(ECHO, Arc::new(Echo));
        let addr = server.local_addr().to_string();
        let handle = server.start();
        let client = RemotingClient::new(ClientConfig::default());
        for body_len in [128usize, 4096] {
            let body = Bytes::from(vec![b'x'; body_len]);
            for concurrency in [1usize, 64, 512] {
                let rate = run(&client, &addr, body.clone(), concurrency).await;
                println!("body {body_len:>5} B, concurrency {concurrency:>3}: {rate:>9.0} req/s");
            }
        }
        client.shutdown().await;
        handle.shutdown().await;
    });
}
