//! The gRPC endpoint's integration tests, one binary: each module is one area, against brokers
//! serving gRPC started by `comet_testkit` on ephemeral ports, so the tests run side by side.

mod grpc;
mod grpc_acl;
mod grpc_clients;
mod grpc_consumer;
mod grpc_tls;
mod grpc_transaction;
mod grpc_types;
