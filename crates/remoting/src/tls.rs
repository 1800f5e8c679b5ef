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

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

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
