//! The protocol's integration tests, one binary: golden frames of the Java and Go clients, and
//! properties of the header and message codecs.

mod golden;
mod header_props;
mod message_props;
