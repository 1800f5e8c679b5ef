//! TLS on the gRPC port, with TLS and plaintext clients on the same port.
//!
//! The 5.x SDKs connect over TLS by default and trust any certificate; Apache's proxy serves both
//! on one port (`tls.server.mode=permissive`, with a bundled self-signed certificate). Here too:
//! `grpcTlsMode` is `permissive` by default, `enforcing` refuses plaintext and `disabled` never
//! looks. A connection is told apart by its first byte: a TLS ClientHello starts with the
//! handshake record type 0x16, an HTTP/2 connection with the preface `PRI * HTTP/2.0`. TLS
//! sessions negotiate ALPN `h2`, which gRPC clients require.
//!
//! The certificate is `tlsServerCertPath`/`tlsServerKeyPath` when both are set, otherwise a
//! self-signed one made at start-up for `localhost` and the broker's address. The peek and the
//! handshake run on a task per connection under a deadline, so a silent client holds nothing.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use comet_remoting::{CancellationToken, TlsMode};
use futures::Stream;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tonic::transport::server::{Connected, TcpConnectInfo};

use comet_broker::config::BrokerConfig;

/// First byte of a TLS handshake record (every ClientHello starts with it).
pub const TLS_HANDSHAKE_RECORD_TYPE: u8 = 0x16;
/// How long a new connection may take to send its first byte and finish a TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections accepted and classified but not yet taken by the server.
const READY_QUEUE: usize = 64;

/// The gRPC port's TLS settings could not be used.
#[derive(Debug, Error)]
pub enum GrpcTlsError {
    /// The certificate or key file cannot be read or parsed.
    #[error("gRPC TLS {what} {path}: {reason}")]
    Pem {
        what: &'static str,
        path: String,
        reason: String,
    },
    /// The certificate could not be generated or rustls refused the certificate and key.
    #[error("gRPC TLS: {0}")]
    Config(String),
}

/// What the accept loop needs to serve TLS: the acceptor and whether plaintext is refused.
#[derive(Clone)]
pub struct GrpcTls {
    acceptor: TlsAcceptor,
    enforcing: bool,
}

impl GrpcTls {
    /// The TLS settings of `config`, or `None` with `grpcTlsMode=disabled`.
    pub fn from_config(config: &BrokerConfig) -> Result<Option<Self>, GrpcTlsError> {
        if config.grpc_tls_mode == TlsMode::Disabled {
            return Ok(None);
        }
        let (certs, key) = match (&config.tls_server_cert_path, &config.tls_server_key_path) {
            (Some(cert), Some(key)) => load_pem(cert, key)?,
            _ => self_signed(config)?,
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| GrpcTlsError::Config(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| GrpcTlsError::Config(format!("certificate/key pair unusable: {e}")))?;
        server.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Some(GrpcTls {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            enforcing: config.grpc_tls_mode == TlsMode::Enforcing,
        }))
    }
}

fn load_pem(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), GrpcTlsError> {
    let pem_error = |what, path: &std::path::Path, reason: String| GrpcTlsError::Pem {
        what,
        path: path.display().to_string(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(cert)
        .map_err(|e| pem_error("certificate", cert, e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error("certificate", cert, e.to_string()))?;
    if certs.is_empty() {
        return Err(pem_error(
            "certificate",
            cert,
            "no CERTIFICATE block".to_owned(),
        ));
    }
    let key =
        PrivateKeyDer::from_pem_file(key).map_err(|e| pem_error("key", key, e.to_string()))?;
    Ok((certs, key))
}

fn self_signed(
    config: &BrokerConfig,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), GrpcTlsError> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let own = config.resolve_broker_ip().to_string();
    if !names.contains(&own) {
        names.push(own);
    }
    let made = rcgen::generate_simple_self_signed(names)
        .map_err(|e| GrpcTlsError::Config(format!("self-signed certificate: {e}")))?;
    let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
    Ok((vec![made.cert.der().clone()], PrivateKeyDer::Pkcs8(key)))
}

/// One accepted connection, plaintext or TLS.
pub enum GrpcIo {
    /// A plaintext (h2c) connection.
    Plain(TcpStream),
    /// A TLS session.
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl Connected for GrpcIo {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        match self {
            GrpcIo::Plain(stream) => stream.connect_info(),
            GrpcIo::Tls(session) => session.get_ref().0.connect_info(),
        }
    }
}

impl AsyncRead for GrpcIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            GrpcIo::Plain(s) => Pin::new(s).poll_read(cx, buf),
            GrpcIo::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for GrpcIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            GrpcIo::Plain(s) => Pin::new(s).poll_write(cx, buf),
            GrpcIo::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            GrpcIo::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            GrpcIo::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            GrpcIo::Plain(s) => s.is_write_vectored(),
            GrpcIo::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            GrpcIo::Plain(s) => Pin::new(s).poll_flush(cx),
            GrpcIo::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            GrpcIo::Plain(s) => Pin::new(s).poll_shutdown(cx),
            GrpcIo::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The connections of `listener`, each classified as plaintext or TLS on a task of its own,
/// until `stop` is cancelled.
pub fn incoming(
    listener: TcpListener,
    tls: Option<GrpcTls>,
    stop: CancellationToken,
) -> impl Stream<Item = io::Result<GrpcIo>> + Send + 'static {
    let (tx, rx) = mpsc::channel::<GrpcIo>(READY_QUEUE);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = stop.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::debug!(error = %e, "gRPC accept failed");
                    continue;
                }
            };
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
            }
            let tx = tx.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                if let Some(io) = classify(stream, peer, tls).await {
                    let _ = tx.send(io).await;
                }
            });
        }
    });
    futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|io| (Ok(io), rx))
    })
}

/// Peeks at the first byte of `stream` and runs the TLS handshake when it starts one.
async fn classify(stream: TcpStream, peer: SocketAddr, tls: Option<GrpcTls>) -> Option<GrpcIo> {
    let Some(tls) = tls else {
        return Some(GrpcIo::Plain(stream));
    };
    let mut first = [0u8; 1];
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.peek(&mut first)).await {
        Ok(Ok(1)) => {}
        Ok(Ok(_)) | Ok(Err(_)) => return None,
        Err(_) => {
            tracing::debug!(%peer, "gRPC connection sent nothing; closed");
            return None;
        }
    }
    if first[0] != TLS_HANDSHAKE_RECORD_TYPE {
        if tls.enforcing {
            tracing::warn!(%peer, "plaintext gRPC connection refused: grpcTlsMode is enforcing");
            return None;
        }
        return Some(GrpcIo::Plain(stream));
    }
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor.accept(stream)).await {
        Ok(Ok(session)) => Some(GrpcIo::Tls(Box::new(session))),
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "gRPC TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "gRPC TLS handshake timed out");
            None
        }
    }
}
