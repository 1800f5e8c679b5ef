//! The `comet` binary's integration tests, one binary: the command line against in-process name
//! servers and brokers (`comet_testkit::cluster`), and `comet serve` / `comet cluster` as child
//! processes (`comet_testkit::process`) on free ports in temporary directories, so the tests run
//! side by side.

mod abuse;
mod cli_admin;
mod cli_client;
mod cli_trace;
mod cluster;
mod configuration_reference;
mod docs_examples;
mod kill9;
mod topic_journal;
