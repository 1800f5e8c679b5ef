//! The RocketMQ 5.x gRPC protocol (`apache.rocketmq.v2`) as Rust types, with tonic clients and
//! servers for `MessagingService` and `Admin`.
//!
//! The `.proto` files under `proto/` are Comet's own, written to match the published contract
//! (rocketmq-proto 2.0.4) message for message and field for field; the interop suite
//! `interop/grpc-descriptors` compares their descriptors with the ones inside Apache's jar.

#![forbid(unsafe_code)]

/// Generated messages, enums and services of package `apache.rocketmq.v2`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v2 {
    tonic::include_proto!("apache.rocketmq.v2");
}

/// The encoded `google.protobuf.FileDescriptorSet` of Comet's `.proto` files (with the
/// `google/protobuf` files they import), as compiled at build time.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/rocketmq_v2_descriptors.bin"));

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn descriptor_set_holds_the_three_files_and_the_messaging_service() {
        let set = prost_types::FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).expect("decodes");
        let names: Vec<&str> = set.file.iter().map(|f| f.name()).collect();
        for wanted in [
            "apache/rocketmq/v2/definition.proto",
            "apache/rocketmq/v2/service.proto",
            "apache/rocketmq/v2/admin.proto",
        ] {
            assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
        }
        let service = set
            .file
            .iter()
            .flat_map(|f| f.service.iter())
            .find(|s| s.name() == "MessagingService")
            .expect("MessagingService");
        assert_eq!(service.method.len(), 16);
    }

    #[test]
    fn generated_types_encode_with_the_contract_field_numbers() {
        let status = v2::Status {
            code: v2::Code::TopicNotFound as i32,
            message: "t".into(),
        };
        // Field 1 varint 40402, field 2 length-delimited "t".
        assert_eq!(
            status.encode_to_vec(),
            vec![0x08, 0xD2, 0xBB, 0x02, 0x12, 0x01, b't']
        );
    }
}
