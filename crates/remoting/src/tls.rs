//! Optional TLS for the server, with plaintext and TLS on the same port.
//!
//! RocketMQ's `tls.server.mode=permissive` lets TLS and plaintext clients share one listener by
//! looking at the first byte a client sends: a TLS ClientHello always starts with the handshake
//! record type 0x16, while a remoting frame starts with its 4-byte big-endian length, whose first
//! byte is 0 for every frame under 16 MiB ([`comet_protocol::limits::MAX_FRAME_LEN`]). So the
//! server peeks (without consuming) one byte and either runs the TLS handshake or hands the
//! untouched socket to the plaintext path. `enforcing` refuses plaintext; `disabled` never looks.
//!
//! The peek and the handshake run on the connection's own task with a deadline, so a client that
//! connects and says nothing cannot stall the accept loop or hold a task forever.
//!
//! Certificates and keys are PEM files (the first private key found is used). The crypto
//! provider is *ring*, chosen explicitly so no process-wide default provider is needed.
//!
//! The client side ([`ClientTlsConfig`]) wraps every connection of a `RemotingClient` in TLS. It
//! trusts the system roots or a PEM file; `insecure_skip_verify` mirrors RocketMQ's
//! `tls.test.mode.enable` for brokers with self-signed certificates.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::error::RemotingError;

/// First byte of every TLS record carrying a handshake message (a ClientHello included).
pub const TLS_HANDSHAKE_RECORD_TYPE: u8 = 0x16;

/// How long a new connection may take to send its first byte and, for TLS, finish the handshake.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// RocketMQ's `tls.server.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// Plaintext only; no certificate needed.
    #[default]
    Disabled,
    /// TLS and plaintext on the same port (decided by the first byte).
    Permissive,
    /// TLS only; plaintext connections are closed.
    Enforcing,
}

impl TlsMode {
    /// `disabled`, `permissive` or `enforcing` (case-insensitive), as in RocketMQ.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "disabled" => Some(TlsMode::Disabled),
            "permissive" => Some(TlsMode::Permissive),
            "enforcing" => Some(TlsMode::Enforcing),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::Permissive => "permissive",
            TlsMode::Enforcing => "enforcing",
        }
    }
}

/// TLS settings of a [`crate::RemotingServer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    pub mode: TlsMode,
    /// PEM certificate chain, leaf first (`tls.server.certPath`).
    pub cert_path: PathBuf,
    /// PEM private key: PKCS#8, PKCS#1 or SEC1 (`tls.server.keyPath`).
    pub key_path: PathBuf,
}

impl TlsConfig {
    pub fn new(mode: TlsMode, cert_path: impl Into<PathBuf>, key_path: impl Into<PathBuf>) -> Self {
        TlsConfig {
            mode,
            cert_path: cert_path.into(),
            key_path: key_path.into(),
        }
    }
}

/// Where a TLS client finds the certificates it trusts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TrustRoots {
    /// The operating system's trust store (`rustls-native-certs`: the CA bundle OpenSSL would
    /// use on Linux, the platform verifier's roots elsewhere).
    #[default]
    System,
    /// Only the certificates in this PEM file (RocketMQ `tls.client.trustCertPath`), e.g. a
    /// private CA or a self-signed broker certificate.
    PemFile(PathBuf),
}

/// TLS settings of a [`crate::RemotingClient`]: every connection it makes speaks TLS (RocketMQ
/// `tls.enable` / `useTLS`), name servers included.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientTlsConfig {
    /// Name the server certificate must carry (and the SNI sent). `None`: the host part of the
    /// address dialed, an IP address or a DNS name.
    pub server_name: Option<String>,
    pub trust: TrustRoots,
    /// Accept any server certificate without checking it, as RocketMQ's
    /// `tls.test.mode.enable=true` does. Only for test brokers with throw-away self-signed
    /// certificates: the connection is encrypted but not authenticated.
    pub insecure_skip_verify: bool,
}

/// A client's loaded TLS state.
#[derive(Clone)]
pub(crate) struct ClientTls {
    connector: TlsConnector,
    server_name: Option<ServerName<'static>>,
}

impl ClientTls {
    /// Runs the TLS handshake over `stream`, which was dialed at `addr` (`host:port`).
    pub(crate) async fn connect(
        &self,
        addr: &str,
        stream: TcpStream,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let name = match &self.server_name {
            Some(name) => name.clone(),
            None => server_name_of(addr)?,
        };
        self.connector.connect(name, stream).await
    }
}

/// The host part of `host:port` (`[v6]:port` included) as a TLS server name.
fn server_name_of(addr: &str) -> std::io::Result<ServerName<'static>> {
    let host = match addr.rsplit_once(':') {
        Some((host, _port)) => host,
        None => addr,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned()).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{host:?} is not a valid TLS server name: {e}"),
        )
    })
}

/// Builds the connector of `config`: trust roots loaded, or verification switched off.
pub(crate) fn load_client_tls(config: &ClientTlsConfig) -> Result<ClientTls, RemotingError> {
    let failed = |reason: String| RemotingError::Tls { reason };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| failed(e.to_string()))?;
    let client_config = if config.insecure_skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate { provider }))
            .with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        match &config.trust {
            TrustRoots::System => {
                let found = rustls_native_certs::load_native_certs();
                for error in &found.errors {
                    tracing::debug!(error = %error, "a system trust store entry could not be read");
                }
                let (added, _ignored) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(failed(
                        "no usable certificate in the system trust store".to_owned(),
                    ));
                }
            }
            TrustRoots::PemFile(path) => {
                let certs = CertificateDer::pem_file_iter(path)
                    .map_err(|e| failed(format!("trust roots {}: {e}", path.display())))?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| failed(format!("trust roots {}: {e}", path.display())))?;
                let (added, _ignored) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(failed(format!(
                        "trust roots {}: no usable CERTIFICATE block",
                        path.display()
                    )));
                }
            }
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    let server_name = match &config.server_name {
        Some(name) => Some(
            ServerName::try_from(name.clone())
                .map_err(|e| failed(format!("server name {name:?}: {e}")))?,
        ),
        None => None,
    };
    Ok(ClientTls {
        connector: TlsConnector::from(Arc::new(client_config)),
        server_name,
    })
}

/// The verifier of `insecure_skip_verify`: any certificate chain and name are accepted, but the
/// handshake signatures are still checked, so the session keys belong to whoever presented the
/// certificate.
#[derive(Debug)]
struct AcceptAnyCertificate {
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A server's loaded TLS state: the acceptor and the mode.
#[derive(Clone)]
pub(crate) struct ServerTls {
    pub acceptor: TlsAcceptor,
    pub mode: TlsMode,
}

/// Loads the certificate and key of `config`; `None` when TLS is disabled.
pub(crate) fn load_server_tls(config: &TlsConfig) -> Result<Option<ServerTls>, RemotingError> {
    if config.mode == TlsMode::Disabled {
        return Ok(None);
    }
    let failed = |reason: String| RemotingError::Tls { reason };
    let certs = CertificateDer::pem_file_iter(&config.cert_path)
        .map_err(|e| failed(format!("certificate {}: {e}", config.cert_path.display())))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(format!("certificate {}: {e}", config.cert_path.display())))?;
    if certs.is_empty() {
        return Err(failed(format!(
            "certificate {}: no CERTIFICATE block",
            config.cert_path.display()
        )));
    }
    let key = PrivateKeyDer::from_pem_file(&config.key_path)
        .map_err(|e| failed(format!("private key {}: {e}", config.key_path.display())))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server_config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| failed(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| failed(format!("certificate/key pair unusable: {e}")))?;
    Ok(Some(ServerTls {
        acceptor: TlsAcceptor::from(Arc::new(server_config)),
        mode: config.mode,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_names_round_trip() {
        for mode in [TlsMode::Disabled, TlsMode::Permissive, TlsMode::Enforcing] {
            assert_eq!(TlsMode::parse(mode.name()), Some(mode));
        }
        assert_eq!(TlsMode::parse(" Permissive "), Some(TlsMode::Permissive));
        assert_eq!(TlsMode::parse("on"), None);
    }

    #[test]
    fn server_names_come_from_the_dialed_host() {
        assert!(matches!(
            server_name_of("127.0.0.1:10911"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name_of("[::1]:10911"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name_of("broker-a.example:10911"),
            Ok(ServerName::DnsName(_))
        ));
        assert!(server_name_of("bad name!:1").is_err());
    }

    #[test]
    fn client_trust_file_errors_are_reported() {
        let missing = ClientTlsConfig {
            trust: TrustRoots::PemFile("/nonexistent/ca.pem".into()),
            ..ClientTlsConfig::default()
        };
        match load_client_tls(&missing) {
            Err(RemotingError::Tls { reason }) => assert!(reason.contains("ca.pem"), "{reason}"),
            Err(other) => panic!("unexpected error {other}"),
            Ok(_) => panic!("a missing trust file must fail"),
        }
        let skip = ClientTlsConfig {
            insecure_skip_verify: true,
            ..missing
        };
        assert!(load_client_tls(&skip).is_ok());
    }

    #[test]
    fn missing_files_are_reported() {
        let cfg = TlsConfig::new(
            TlsMode::Permissive,
            "/nonexistent/cert.pem",
            "/nonexistent/key.pem",
        );
        match load_server_tls(&cfg) {
            Err(RemotingError::Tls { reason }) => assert!(reason.contains("cert.pem"), "{reason}"),
            Err(other) => panic!("unexpected error {other}"),
            Ok(_) => panic!("loading missing files must fail"),
        }
        let off = TlsConfig::new(
            TlsMode::Disabled,
            "/nonexistent/cert.pem",
            "/nonexistent/key.pem",
        );
        assert!(matches!(load_server_tls(&off), Ok(None)));
    }
}
