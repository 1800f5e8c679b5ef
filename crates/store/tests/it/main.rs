//! The store's integration tests, one binary: stores in temporary directories with small files
//! (`comet_testkit::store`). `crash` re-executes this binary as its child writer.

mod commit_log;
mod crash;
mod queues;
mod recovery;
mod replica;
mod store;
