//! The client side: [`AclClientRpcHook`] signs every request just before it is sent.
//!
//! It runs as the last step before encoding, after the typed header has been written into the
//! ext fields, so the signature covers exactly what goes on the wire. Responses are not signed.

use std::fmt;
use std::net::SocketAddr;

use comet_protocol::RemotingCommand;
use comet_remoting::RpcHook;

use crate::signature::{ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, request_signature};

/// An AccessKey/SecretKey pair (and optional security token) of a `plain_acl.yml` account.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionCredentials {
    pub access_key: String,
    pub secret_key: String,
    pub security_token: Option<String>,
}

impl SessionCredentials {
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
        SessionCredentials {
            access_key: access_key.into(),
            secret_key: secret_key.into(),
            security_token: None,
        }
    }

    pub fn with_security_token(mut self, token: impl Into<String>) -> Self {
        self.security_token = Some(token.into());
        self
    }
}

/// The secret key never appears in logs or `{:?}` output.
impl fmt::Debug for SessionCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionCredentials")
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .field(
                "security_token",
                &self.security_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Signs outgoing requests with [`SessionCredentials`]; install it with
/// `RemotingClient::add_rpc_hook`.
#[derive(Debug, Clone)]
pub struct AclClientRpcHook {
    credentials: SessionCredentials,
}

impl AclClientRpcHook {
    pub fn new(credentials: SessionCredentials) -> Self {
        AclClientRpcHook { credentials }
    }

    pub fn credentials(&self) -> &SessionCredentials {
        &self.credentials
    }

    /// Adds `AccessKey` (and `SecurityToken`) and the `Signature` over the whole request.
    pub fn sign_request(&self, request: &mut RemotingCommand) {
        let ext = request.ext_mut();
        ext.insert(ACCESS_KEY, &self.credentials.access_key);
        if let Some(token) = &self.credentials.security_token {
            ext.insert(SECURITY_TOKEN, token);
        }
        let signature = request_signature(request, &[], &self.credentials.secret_key);
        request.ext_mut().insert(SIGNATURE, signature);
    }
}

impl RpcHook for AclClientRpcHook {
    fn before_request(
        &self,
        _remote: SocketAddr,
        request: &mut RemotingCommand,
    ) -> Result<(), Box<RemotingCommand>> {
        self.sign_request(request);
        Ok(())
    }

    fn after_response(
        &self,
        _remote: SocketAddr,
        _request: &RemotingCommand,
        _response: &mut RemotingCommand,
    ) {
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::{signed_content, verify};

    #[test]
    fn signed_request_verifies_and_resigning_is_stable() {
        let hook = AclClientRpcHook::new(
            SessionCredentials::new("ak", "secret-key").with_security_token("tok"),
        );
        let mut req = RemotingCommand::request(34).with_body(&b"{}"[..]);
        hook.sign_request(&mut req);
        assert_eq!(req.ext(ACCESS_KEY), Some("ak"));
        assert_eq!(req.ext(SECURITY_TOKEN), Some("tok"));
        let sig = req.ext(SIGNATURE).map(str::to_owned).unwrap_or_default();
        assert!(verify(&signed_content(&req, &[]), "secret-key", &sig));
        // A retried request is signed again over the same content: same signature.
        hook.sign_request(&mut req);
        assert_eq!(req.ext(SIGNATURE), Some(sig.as_str()));
    }

    #[test]
    fn debug_hides_the_secret() {
        let text = format!("{:?}", SessionCredentials::new("ak", "very-secret"));
        assert!(text.contains("ak"));
        assert!(!text.contains("very-secret"));
    }
}
