//! # comet-testkit
//!
//! The harness of Comet's integration tests, one module per concern:
//!
//! - [`wait`]: the one wait-until. Tests never sleep to synchronize: asynchronous effects are
//!   polled until a deadline, which fails the test instead of hanging it.
//! - [`cluster`]: a real name server and broker (with its gRPC endpoint when configured) on
//!   127.0.0.1 with ephemeral ports in a temporary directory ([`TestBroker`], and [`Cluster`]
//!   with the client-level tests' geometry), slaves of it, topics and offsets.
//! - [`requests`]: builders of the raw requests tests send (sends, pulls, heartbeats).
//! - [`client`]: producers, push consumers with listeners that report every delivery, and
//!   client settings with instance names unique in the process.
//! - [`wiretap`]: a recording relay between clients and a broker.
//! - [`console`]: the web console's router over a cluster, driven request by request.
//! - [`process`]: the `comet` binary as a child process (`comet serve`, one-shot commands).
//! - [`grpc`]: a gRPC client to the broker's endpoint; [`scrape`]: its Prometheus endpoint.
//! - [`store`]: store configurations, messages and a seeded generator for store-level tests.
//!
//! Everything a test starts is its own (ports, directories, client instances), so the tests of
//! one binary run side by side on parallel threads.
//!
//! The crate is a dev-dependency only. Without default features it is [`wait`] alone, which the
//! lowest layers' tests use without building a broker; feature `store` adds [`store`], and
//! `stack` (the default) everything.

pub mod wait;

#[cfg(feature = "store")]
pub mod store;

#[cfg(feature = "stack")]
pub mod client;
#[cfg(feature = "stack")]
pub mod cluster;
#[cfg(feature = "stack")]
pub mod console;
#[cfg(feature = "stack")]
pub mod grpc;
#[cfg(feature = "stack")]
pub mod process;
#[cfg(feature = "stack")]
pub mod requests;
#[cfg(feature = "stack")]
pub mod scrape;
#[cfg(feature = "stack")]
pub mod wiretap;

pub use wait::{POLL, WAIT_DEADLINE, eventually, wait_for, wait_until};

#[cfg(feature = "stack")]
pub use cluster::{
    CLIENT_COMMIT_LOG_SEGMENT, Cluster, RPC_TIMEOUT, TEST_COMMIT_LOG_SEGMENT,
    TEST_CONSUME_QUEUE_FILE, TestBroker, client_test_config, test_config, wait_indexed,
};
#[cfg(feature = "stack")]
pub use requests::{
    PRODUCER_GROUP, decode_msg_id, heartbeat, now_millis, properties, pull, send_batch,
    send_header, send_v1, send_v2,
};
