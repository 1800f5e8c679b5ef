//! TLS on the gRPC port: a TLS client (ALPN `h2`, as the 5.x SDKs connect by default) and a
//! plaintext one are both served on the one port in the default `permissive` mode; `enforcing`
//! refuses plaintext; a configured certificate is the one presented.

use std::net::SocketAddr;
use std::sync::Arc;

use comet_grpc_proto::v2;
use comet_grpc_proto::v2::messaging_service_client::MessagingServiceClient;
use comet_remoting::TlsMode;
use comet_testkit::TestBroker;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio_rustls::{TlsConnector, rustls};
use tonic::transport::{Channel, Endpoint};

/// A certificate for 127.0.0.1 written to `dir`; returns its DER and the two PEM paths.
fn certificate(
    dir: &std::path::Path,
) -> (
    CertificateDer<'static>,
    std::path::PathBuf,
    std::path::PathBuf,
) {
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).expect("cert");
    let cert_path = dir.join("grpc.pem");
    let key_path = dir.join("grpc.key");
    std::fs::write(&cert_path, made.cert.pem()).expect("cert written");
    std::fs::write(&key_path, made.signing_key.serialize_pem()).expect("key written");
    (made.cert.der().clone(), cert_path, key_path)
}

fn connector(trusted: CertificateDer<'static>) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(trusted).expect("root added");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    TlsConnector::from(Arc::new(config))
}

/// A tonic channel to `addr` over TLS made by `connector`.
async fn tls_channel(
    addr: SocketAddr,
    connector: TlsConnector,
) -> Result<Channel, tonic::transport::Error> {
    Endpoint::from_static("http://127.0.0.1")
        .connect_with_connector(tower::service_fn(move |_| {
            let connector = connector.clone();
            async move {
                let tcp = tokio::net::TcpStream::connect(addr).await?;
                let name = ServerName::try_from("127.0.0.1").expect("IP name");
                let session = connector.connect(name, tcp).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(session))
            }
        }))
        .await
}

async fn query_route(channel: Channel) -> Result<v2::QueryRouteResponse, tonic::Status> {
    let mut request = tonic::Request::new(v2::QueryRouteRequest {
        topic: Some(v2::Resource {
            resource_namespace: String::new(),
            name: "TBW102".to_owned(),
        }),
        endpoints: None,
    });
    request
        .metadata_mut()
        .insert("x-mq-client-id", "tls-test".parse().expect("ASCII"));
    MessagingServiceClient::new(channel)
        .query_route(request)
        .await
        .map(tonic::Response::into_inner)
}

async fn start(mode: TlsMode) -> (TestBroker, CertificateDer<'static>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (der, cert_path, key_path) = certificate(dir.path());
    let broker = TestBroker::start_with(move |c| {
        c.enable_grpc_server = true;
        c.grpc_server_port = 0;
        c.grpc_tls_mode = mode;
        c.tls_server_cert_path = Some(cert_path);
        c.tls_server_key_path = Some(key_path);
    })
    .await;
    // The PEM files were read at start-up.
    drop(dir);
    (broker, der)
}

#[tokio::test]
async fn permissive_serves_tls_and_plaintext_on_one_port() {
    let (broker, der) = start(TlsMode::Permissive).await;
    let addr = broker.grpc_addr().expect("gRPC endpoint on");

    // The handshake negotiates h2 with the configured certificate (the client trusts only it).
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let name = ServerName::try_from("127.0.0.1").expect("IP name");
    let session = connector(der.clone())
        .connect(name, tcp)
        .await
        .expect("TLS handshake with the configured certificate");
    assert_eq!(session.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    drop(session);

    let channel = tls_channel(addr, connector(der))
        .await
        .expect("TLS channel");
    let over_tls = query_route(channel).await.expect("gRPC OK over TLS");
    assert_eq!(over_tls.status.expect("status").code(), v2::Code::Ok);

    let plain = Channel::from_shared(format!("http://{addr}"))
        .expect("URI")
        .connect()
        .await
        .expect("plaintext channel");
    let over_plaintext = query_route(plain).await.expect("gRPC OK over plaintext");
    assert_eq!(over_plaintext.status.expect("status").code(), v2::Code::Ok);
    broker.shutdown().await;
}

#[tokio::test]
async fn enforcing_refuses_plaintext() {
    let (broker, der) = start(TlsMode::Enforcing).await;
    let addr = broker.grpc_addr().expect("gRPC endpoint on");
    let channel = tls_channel(addr, connector(der))
        .await
        .expect("TLS channel");
    assert!(query_route(channel).await.is_ok());
    let refused = match Channel::from_shared(format!("http://{addr}"))
        .expect("URI")
        .connect()
        .await
    {
        Ok(plain) => query_route(plain).await.is_err(),
        Err(_) => true,
    };
    assert!(refused, "a plaintext call must fail under enforcing");
    broker.shutdown().await;
}

#[tokio::test]
async fn disabled_serves_plaintext_only() {
    let broker = TestBroker::start_with(|c| {
        c.enable_grpc_server = true;
        c.grpc_server_port = 0;
        c.grpc_tls_mode = TlsMode::Disabled;
    })
    .await;
    let addr = broker.grpc_addr().expect("gRPC endpoint on");
    let plain = Channel::from_shared(format!("http://{addr}"))
        .expect("URI")
        .connect()
        .await
        .expect("plaintext channel");
    assert!(query_route(plain).await.is_ok());
    broker.shutdown().await;
}
