//! Errors of the ACL crate.
//!
//! Two kinds, kept apart on purpose: an [`AclError`] means the *configuration* is unusable (the
//! broker refuses to start with it, or a hot reload keeps the previous file), while an
//! [`AccessDenied`] is the verdict on one request and becomes the remark of its NO_PERMISSION
//! response, so its text must tell an operator exactly which rule refused what.

use std::path::PathBuf;

use thiserror::Error;

/// `plain_acl.yml` cannot be read or does not describe a valid configuration.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AclError {
    #[error("cannot read ACL file {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("ACL file {path} is {len} bytes, more than the {max} accepted")]
    TooLarge { path: PathBuf, len: u64, max: u64 },
    #[error("ACL file is not valid YAML for plain_acl.yml: {0}")]
    Yaml(String),
    #[error("ACL account #{index}: {reason}")]
    Account { index: usize, reason: String },
    #[error("ACL address pattern {pattern:?} is invalid: {reason}")]
    AddressPattern { pattern: String, reason: String },
}

/// Why one request was refused. The `Display` text is the response remark.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AccessDenied {
    #[error(
        "ACL: request code {code} carries no AccessKey (sign requests with an AccessKey/SecretKey pair)"
    )]
    MissingAccessKey { code: i32 },
    #[error("ACL: no account for accessKey={access_key}")]
    UnknownAccessKey { access_key: String },
    #[error("ACL: request code {code} from accessKey={access_key} carries no Signature")]
    MissingSignature { code: i32, access_key: String },
    #[error("ACL: check signature failed for accessKey={access_key} (request code {code})")]
    BadSignature { code: i32, access_key: String },
    #[error(
        "ACL: request code {code} needs admin permission, but accessKey={access_key} is not admin"
    )]
    NeedAdmin { code: i32, access_key: String },
    #[error(
        "ACL: accessKey={access_key} has no {needed} permission on {kind} {resource} (request code {code})"
    )]
    NoPermission {
        code: i32,
        access_key: String,
        kind: &'static str,
        resource: String,
        needed: &'static str,
    },
    #[error("ACL: request code {code} cannot be checked: {reason}")]
    Unparsable { code: i32, reason: String },
}
