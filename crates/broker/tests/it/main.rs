//! The broker's integration tests, one binary (one link of the whole stack instead of one per
//! file): each module is one area, against real name servers and brokers started by
//! `comet_testkit` on ephemeral ports in temporary directories, so the tests run side by side.

mod admin;
mod call_consumer;
mod config_tables;
mod consumer;
mod golden_replay;
mod metrics;
mod pop;
mod pull;
mod replication;
mod restart;
mod retry;
mod send;
mod timer;
mod transaction;
mod update_config;
