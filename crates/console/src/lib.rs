//! Comet's web console: a browser front end over the RocketMQ admin protocol.
//!
//! The console reaches the cluster only as an admin client of its name servers (the
//! [`comet_client::admin`] module), so the same console serves a Comet cluster from inside
//! `comet serve` / `comet broker`, or any RocketMQ cluster, Apache's included, from
//! `comet console -n host:9876`.
//!
//! It is one [`axum::Router`]: a JSON API under `/api/` and a single page (plain HTML, CSS and
//! JavaScript embedded in the binary, no build step) that calls it. Every page and API call needs
//! a login; see [`auth`] for the security model and [`config`] for the keys. A running console
//! also samples the cluster for its charts ([`sampler`] into [`history`]).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod api;
mod assets;
pub mod auth;
pub mod config;
pub mod error;
pub mod guard;
pub mod history;
pub mod sampler;
pub mod state;

use std::net::SocketAddr;
use std::sync::Arc;

use comet_client::ClientConfig;
use comet_client::admin::MQAdmin;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use config::ConsoleConfig;
pub use error::{ApiError, ConfigError, ConsoleError};
pub use state::AppState;

/// Builds the console's state for the cluster whose name servers `client` names: the admin
/// client (signing its requests when the config has ACL keys) and the accounts (generating the admin password at first start; it is returned so the
/// caller can show it once).
pub fn build_state(
    config: ConsoleConfig,
    mut client: ClientConfig,
) -> Result<(Arc<AppState>, Option<String>), ConsoleError> {
    config.validate()?;
    if let (Some(access), Some(secret)) = (&config.access_key, &config.secret_key) {
        client.credentials = Some(comet_client::SessionCredentials::new(
            access.clone(),
            secret.clone(),
        ));
    }
    let admin = MQAdmin::new(client)?;
    let (accounts, generated) = auth::Accounts::load_or_create(&config)?;
    Ok((Arc::new(AppState::new(admin, accounts, config)), generated))
}

/// The console's router over `state`.
pub fn router(state: Arc<AppState>) -> axum::Router {
    api::router(state)
}

/// A running console.
pub struct ConsoleHandle {
    local_addr: SocketAddr,
    state: Arc<AppState>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    sampler: JoinHandle<()>,
}

impl ConsoleHandle {
    /// The address the console listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops serving and sampling and closes the console's cluster connections.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.sampler.abort();
        let _ = (&mut self.sampler).await;
        let _ = (&mut self.task).await;
        self.state.shutdown().await;
    }
}

/// Starts the console on `config`'s address for the cluster `client` names, and its sampling of
/// the charts' figures. A generated admin password is written once to stderr.
pub async fn start(
    config: ConsoleConfig,
    client: ClientConfig,
) -> Result<ConsoleHandle, ConsoleError> {
    let addr = config.listen_addr();
    let (state, generated) = build_state(config, client)?;
    if let Some(password) = generated {
        eprintln!(
            "comet console: generated password for user '{}': {password} (shown once; its hash is kept in {})",
            auth::ADMIN_USER,
            state.config.data_dir.join("users.json").display()
        );
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ConsoleError::Bind {
            addr: addr.to_string(),
            source,
        })?;
    let local_addr = listener.local_addr().map_err(|source| ConsoleError::Bind {
        addr: addr.to_string(),
        source,
    })?;
    let app = router(state.clone());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await;
        if let Err(e) = served {
            tracing::warn!(error = %e, "console server stopped");
        }
    });
    let sampler = tokio::spawn(sampler::run(state.clone()));
    tracing::info!(addr = %local_addr, "console listening: http://{local_addr}/");
    Ok(ConsoleHandle {
        local_addr,
        state,
        stop: Some(stop),
        task,
        sampler,
    })
}
