//! The web console's integration tests, one binary: the console's router over a name server and
//! broker started by `comet_testkit::console`, driven request by request.

mod operations;
mod pages;
mod security;
