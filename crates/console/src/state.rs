//! What every handler shares: the admin client, the accounts and sessions, the producer writes
//! use, the last runtime figures of each broker (to turn counters into rates), the sampled
//! series of the charts and the name servers' reachability.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use comet_client::admin::{MQAdmin, TOOLS_PRODUCER_GROUP};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use parking_lot::Mutex;
use tokio::sync::OnceCell;

use crate::auth::{Accounts, Sessions};
use crate::config::ConsoleConfig;
use crate::error::ApiError;
use crate::history::{Health, History};

/// Numbers the consoles of this process (see [`AppState::producer`]).
static INSTANCE_SEQ: AtomicUsize = AtomicUsize::new(0);

/// A broker's message counters at one moment.
#[derive(Debug, Clone, Copy)]
pub struct CounterSample {
    /// When they were read.
    pub at: Instant,
    /// Messages stored so far, when the broker reports it.
    pub put: Option<u64>,
    /// Messages delivered so far, when the broker reports it.
    pub get: Option<u64>,
}

/// The console's shared state.
pub struct AppState {
    /// The cluster, as an admin client.
    pub admin: MQAdmin,
    /// The accounts.
    pub accounts: Accounts,
    /// The live sessions.
    pub sessions: Sessions,
    /// The configuration.
    pub config: ConsoleConfig,
    /// The producer of test messages and dead-letter resends, started at first use.
    producer: OnceCell<DefaultMQProducer>,
    /// The previous counters of each broker address.
    pub samples: Mutex<HashMap<String, CounterSample>>,
    /// The series the charts draw.
    pub history: History,
    /// Whether the name servers answered the last time they were asked.
    pub health: Health,
}

impl AppState {
    /// The state of a console over `admin`.
    pub fn new(admin: MQAdmin, accounts: Accounts, config: ConsoleConfig) -> Self {
        AppState {
            sessions: Sessions::new(config.session_timeout()),
            history: History::new(config.sample_interval()),
            health: Health::default(),
            admin,
            accounts,
            config,
            producer: OnceCell::new(),
            samples: Mutex::new(HashMap::new()),
        }
    }

    /// The producer, started on first use with the admin's name servers and credentials.
    pub async fn producer(&self) -> Result<&DefaultMQProducer, ApiError> {
        self.producer
            .get_or_try_init(|| async {
                let client = self.admin.config().clone();
                let mut config =
                    ProducerConfig::new(TOOLS_PRODUCER_GROUP, client.namesrv_addr.clone());
                config.client = client;
                // Client instances are shared per client id, so each console gets its own.
                let seq = INSTANCE_SEQ.fetch_add(1, Ordering::Relaxed);
                config.client.instance_name = format!("comet-console-{}-{seq}", std::process::id());
                let producer = DefaultMQProducer::new(config);
                producer.start().await?;
                Ok::<_, ApiError>(producer)
            })
            .await
    }

    /// Stops the producer, if it was started.
    pub async fn shutdown(&self) {
        if let Some(producer) = self.producer.get() {
            producer.shutdown().await;
        }
        self.admin.shutdown().await;
    }
}
