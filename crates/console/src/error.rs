//! The console's errors: configuration and start-up ([`ConfigError`], [`ConsoleError`]) and the
//! API's answers ([`ApiError`], a status with a JSON `{"error": "..."}` body).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use comet_client::ClientError;
use thiserror::Error;

/// A configuration value the console cannot use.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// The value of `key` is unusable.
    #[error("{key}: {reason}")]
    BadValue {
        /// The configuration key.
        key: String,
        /// Why the value was refused.
        reason: String,
    },
}

/// Why the console could not start.
#[derive(Debug, Error)]
pub enum ConsoleError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The accounts file could not be read or written.
    #[error("console accounts file {path}: {reason}")]
    Accounts {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The admin client could not be built.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The listener could not be bound.
    #[error("console listener on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// An API failure: the status to answer and a message for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The message put in the JSON body.
    pub message: String,
}

impl ApiError {
    /// 400: the request is malformed or out of bounds.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404: the named topic, group or message does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// An error with any status.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }
}

impl From<ClientError> for ApiError {
    fn from(e: ClientError) -> Self {
        let status = match &e {
            ClientError::NoRoute { .. } => StatusCode::NOT_FOUND,
            ClientError::IllegalArgument(_) => StatusCode::BAD_REQUEST,
            ClientError::Broker { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            _ => StatusCode::BAD_GATEWAY,
        };
        ApiError::new(status, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(serde_json::json!({ "error": self.message })),
        )
            .into_response()
    }
}

/// The result of an API handler.
pub type ApiResult<T> = Result<T, ApiError>;
