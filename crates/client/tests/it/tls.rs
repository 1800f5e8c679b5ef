//! Comet's producer and push consumer over TLS, against a real in-process broker whose listener
//! is in *enforcing* mode (TLS only) and a name server in permissive mode, both with a freshly
//! generated self-signed certificate. A plaintext client must be refused by the broker.
//!
//! The producer trusts the certificate from its PEM file (name checked against the dialed IP);
//! the consumer uses `insecure_skip_verify`, RocketMQ's test mode. Nothing sleeps to
//! synchronize: deliveries arrive on a channel, awaited under a deadline.

use std::time::Duration;

use comet_broker::BrokerHandle;
use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::message::Message;
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{ClientConfig, ClientTls, SendStatus, TrustRoots};
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{CreateTopicRequestHeader, request_with_header};
use comet_remoting::{RemotingClient, RemotingError, TlsConfig, TlsMode};
use comet_testkit::client::{TestBroker, collect_bodies, reporting_listener, unique_instance};
use comet_testkit::client_test_config;

const TOPIC: &str = "TlsTopic";
const QUEUES: i32 = 4;
const MESSAGES: usize = 20;
const RPC_TIMEOUT: Duration = Duration::from_secs(10);

/// A self-signed certificate for `localhost` and 127.0.0.1, as PEM files in `dir`.
struct TestCert {
    cert_path: std::path::PathBuf,
    key_path: std::path::PathBuf,
}

/// Where [`make_cert`] writes the certificate and key in `dir`.
fn cert_paths(dir: &std::path::Path) -> TestCert {
    TestCert {
        cert_path: dir.join("server.pem"),
        key_path: dir.join("server.key"),
    }
}

fn make_cert(dir: &std::path::Path) -> TestCert {
    let generated =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("generate certificate");
    let paths = cert_paths(dir);
    std::fs::write(&paths.cert_path, generated.cert.pem()).expect("write cert");
    std::fs::write(&paths.key_path, generated.signing_key.serialize_pem()).expect("write key");
    paths
}

/// A permissive (TLS or plaintext) name server and an enforcing (TLS only) broker.
struct TlsCluster {
    cluster: TestBroker,
    cert: TestCert,
}

impl TlsCluster {
    async fn start() -> TlsCluster {
        let cluster = TestBroker::launch(
            client_test_config,
            |namesrv, dir| {
                let cert = make_cert(dir);
                namesrv.tls = Some(TlsConfig::new(
                    TlsMode::Permissive,
                    &cert.cert_path,
                    &cert.key_path,
                ));
            },
            |config, dir| {
                let cert = cert_paths(dir);
                config.tls_server_mode = TlsMode::Enforcing;
                config.tls_server_cert_path = Some(cert.cert_path);
                config.tls_server_key_path = Some(cert.key_path);
            },
        )
        .await;
        TlsCluster {
            cert: cert_paths(cluster.dir.path()),
            cluster,
        }
    }

    fn broker(&self) -> &BrokerHandle {
        self.cluster.broker()
    }

    fn client_config(&self, instance: &str, tls: ClientTls) -> ClientConfig {
        let mut client = ClientConfig::new(self.cluster.namesrv_addr());
        client.client_ip = "127.0.0.1".to_owned();
        client.instance_name = unique_instance(instance);
        client.poll_name_server_interval = Duration::from_secs(1);
        client.rebalance_interval = Duration::from_secs(1);
        client.tls = Some(tls);
        client
    }

    fn trusting(&self) -> ClientTls {
        ClientTls {
            trust: TrustRoots::PemFile(self.cert.cert_path.clone()),
            ..ClientTls::default()
        }
    }

    async fn shutdown(self) {
        self.cluster.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_and_consumer_work_over_tls_against_an_enforcing_broker() {
    let cluster = TlsCluster::start().await;
    let broker_addr = cluster.broker().local_addr().to_string();
    let create = request_with_header(
        RequestCode::UpdateAndCreateTopic,
        &CreateTopicRequestHeader {
            topic: TOPIC.to_owned(),
            default_topic: "TBW102".to_owned(),
            read_queue_nums: QUEUES,
            write_queue_nums: QUEUES,
            perm: 6,
            order: false,
            ..Default::default()
        },
    );

    // Plaintext is refused by the enforcing listener.
    let plain = RemotingClient::new(comet_remoting::ClientConfig::default());
    let refused = plain
        .invoke(&broker_addr, create.clone(), RPC_TIMEOUT)
        .await;
    assert!(
        matches!(
            refused,
            Err(RemotingError::ConnectionClosed { .. } | RemotingError::Io(_))
        ),
        "plaintext must be refused: {refused:?}"
    );
    plain.shutdown().await;

    // The same request over TLS is served.
    let admin = RemotingClient::try_new(comet_remoting::ClientConfig {
        tls: Some(cluster.trusting()),
        ..comet_remoting::ClientConfig::default()
    })
    .expect("TLS client");
    let created = admin
        .invoke(&broker_addr, create, RPC_TIMEOUT)
        .await
        .expect("create topic over TLS");
    assert_eq!(created.code, 0, "create topic: {:?}", created.remark);
    cluster.broker().register_now().await;
    admin.shutdown().await;

    let mut consumer_config = PushConsumerConfig::new("tls_consumer_group");
    consumer_config.client = cluster.client_config(
        "tls-consumer",
        ClientTls {
            insecure_skip_verify: true,
            ..ClientTls::default()
        },
    );
    consumer_config.consume_from_where =
        comet_client::consumer::ConsumeFromWhere::ConsumeFromFirstOffset;
    let consumer = DefaultMQPushConsumer::new(consumer_config);
    let (listener, mut deliveries) = reporting_listener("tls-consumer");
    consumer.register_message_listener(listener);
    consumer.subscribe(TOPIC, "*").await.expect("subscribe");
    consumer.start().await.expect("consumer starts over TLS");

    let mut producer_config = ProducerConfig::new("tls_producer_group", String::new());
    producer_config.client = cluster.client_config("tls-producer", cluster.trusting());
    let producer = DefaultMQProducer::new(producer_config);
    producer.start().await.expect("producer starts over TLS");
    let mut bodies = Vec::with_capacity(MESSAGES);
    for i in 0..MESSAGES {
        let body = format!("tls-{i}");
        let result = producer
            .send(Message::new(TOPIC, body.clone().into_bytes()))
            .await
            .expect("send over TLS");
        assert_eq!(result.send_status, SendStatus::SendOk);
        bodies.push(body);
    }

    let mut seen = Vec::new();
    collect_bodies(&mut deliveries, &mut seen, &bodies).await;

    producer.shutdown().await;
    consumer.shutdown().await;
    cluster.shutdown().await;
}
