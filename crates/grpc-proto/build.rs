//! Compiles Comet's RocketMQ v2 `.proto` files without a `protoc` binary: `protox` (a protobuf
//! compiler written in Rust) produces the FileDescriptorSet, tonic/prost generate the Rust code from
//! it, and the encoded set is written next to the code so the crate can embed it.

use std::path::PathBuf;

use prost::Message;

const PROTO_ROOT: &str = "proto";
const FILES: &[&str] = &[
    "apache/rocketmq/v2/definition.proto",
    "apache/rocketmq/v2/service.proto",
    "apache/rocketmq/v2/admin.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for file in FILES {
        println!("cargo:rerun-if-changed={PROTO_ROOT}/{file}");
    }
    let descriptors = protox::compile(FILES, [PROTO_ROOT])?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("rocketmq_v2_descriptors.bin"),
        descriptors.encode_to_vec(),
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
