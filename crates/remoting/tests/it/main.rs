//! The remoting transport's integration tests, one binary: servers and clients on ephemeral
//! loopback ports.

mod backpressure;
mod e2e;
mod observer;
mod tls;
