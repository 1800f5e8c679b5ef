//! The request observer: told of every answered request with its codes, including refusals and
//! oneway requests, and never of a request whose processor answers later by itself.

use std::sync::Arc;
use std::time::Duration;

use comet_protocol::RemotingCommand;
use comet_protocol::code::ResponseCode;
use comet_protocol::command::FLAG_ONEWAY;
use comet_remoting::{
    Channel, ClientConfig, RemotingClient, RemotingServer, RequestObserver, RequestProcessor,
    ServerConfig,
};
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::mpsc;

const ECHO: i32 = 100;
const LATER: i32 = 101;
const ONEWAY: i32 = 102;
const UNKNOWN: i32 = 999;

struct Recorder(mpsc::UnboundedSender<(i32, i32, bool)>);

impl RequestObserver for Recorder {
    fn answered(&self, request_code: i32, response_code: i32, oneway: bool, _elapsed: Duration) {
        let _ = self.0.send((request_code, response_code, oneway));
    }
}

/// Answers SUCCESS, or nothing (the answer would come later) for LATER.
struct Processor;

impl RequestProcessor for Processor {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let answer =
            (request.code != LATER).then(|| RemotingCommand::response(ResponseCode::Success, None));
        async move { answer }.boxed()
    }
}

async fn next(rx: &mut mpsc::UnboundedReceiver<(i32, i32, bool)>) -> (i32, i32, bool) {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("an observation within 10 s")
        .expect("the observer is alive")
}

#[tokio::test]
async fn every_answer_is_observed_with_its_codes() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let server = RemotingServer::bind(ServerConfig::new("127.0.0.1:0"))
        .await
        .unwrap();
    for code in [ECHO, LATER, ONEWAY] {
        server.register(code, Arc::new(Processor));
    }
    assert!(server.set_request_observer(Arc::new(Recorder(tx.clone()))));
    // One observer per server: a second one is refused and the first stays.
    assert!(!server.set_request_observer(Arc::new(Recorder(tx))));
    let addr = server.local_addr().to_string();
    let server = server.start();
    let client = RemotingClient::new(ClientConfig::default());
    let timeout = Duration::from_secs(10);

    let rsp = client
        .invoke(&addr, RemotingCommand::request(ECHO), timeout)
        .await
        .unwrap();
    assert_eq!(rsp.code, ResponseCode::Success.code());
    assert_eq!(next(&mut rx).await, (ECHO, 0, false));

    let rsp = client
        .invoke(&addr, RemotingCommand::request(UNKNOWN), timeout)
        .await
        .unwrap();
    let not_supported = ResponseCode::RequestCodeNotSupported.code();
    assert_eq!(rsp.code, not_supported);
    assert_eq!(next(&mut rx).await, (UNKNOWN, not_supported, false));

    // A processor that answers later reports nothing; the oneway request sent after it is the
    // next observation.
    let later = client.invoke(
        &addr,
        RemotingCommand::request(LATER),
        Duration::from_millis(200),
    );
    assert!(later.await.is_err(), "nobody answers LATER");
    let mut oneway = RemotingCommand::request(ONEWAY);
    oneway.flag = FLAG_ONEWAY;
    client.invoke_oneway(&addr, oneway).await.unwrap();
    assert_eq!(next(&mut rx).await, (ONEWAY, 0, true));
    assert!(rx.try_recv().is_err(), "nothing else was observed");

    client.shutdown().await;
    server.shutdown().await;
}
