//! The client SDK's integration tests, one binary: each module is one area, against name servers
//! and brokers started by `comet_testkit` on ephemeral ports, every client with an instance name
//! unique in the process (`comet_testkit::client::unique_instance`), so the tests run side by
//! side. One test installs the process-wide tracing subscriber
//! (`push_paths::a_pull_without_subscription_waits_the_exception_delay`); it sees warnings only
//! and reacts only to those about that test's own topic, so the tests beside it neither trigger
//! it nor pay for it.
//!
//! `tests/guide.rs` stays a binary of its own: it is the SDK guide's documented check (`cargo
//! test -p comet-client --test guide`, with `UPDATE_GUIDE=1` to rewrite the guide), and its
//! examples, written as applications are, run one at a time.

mod admin;
mod admin_offline_reset;
mod allocate_refusal;
mod builders;
mod lite;
mod orderly;
mod producer;
mod pull;
mod push;
mod push_parity;
mod push_paths;
mod rebalance;
mod running_info;
mod slave_offsets;
mod tls;
mod trace;
mod transaction;
