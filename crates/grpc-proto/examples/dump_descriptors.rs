//! Prints the messages, enums and services of Comet's `apache.rocketmq.v2` descriptors as one JSON
//! object: for each message its fields (number, type, label, proto3 optional, type name, oneof) and
//! whether it is a map entry; for each enum its values; for each service its methods with input and
//! output types and streaming flags. `interop/grpc-descriptors` prints Apache's embedded
//! descriptors in the same shape and diffs the two.
//!
//!     cargo run -p comet-grpc-proto --example dump_descriptors

use comet_grpc_proto::FILE_DESCRIPTOR_SET;
use prost::Message;
use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorSet};
use serde_json::{Map, Value, json};

const PACKAGE: &str = "apache.rocketmq.v2";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let set = FileDescriptorSet::decode(FILE_DESCRIPTOR_SET)?;
    let mut messages = Map::new();
    let mut enums = Map::new();
    let mut services = Map::new();
    for file in set.file.iter().filter(|f| f.package() == PACKAGE) {
        for message in &file.message_type {
            add_message(PACKAGE, message, &mut messages, &mut enums);
        }
        for e in &file.enum_type {
            add_enum(PACKAGE, e, &mut enums);
        }
        for service in &file.service {
            let mut methods = Map::new();
            for m in &service.method {
                methods.insert(
                    m.name().to_owned(),
                    json!({
                        "input": strip(m.input_type()),
                        "output": strip(m.output_type()),
                        "client_streaming": m.client_streaming(),
                        "server_streaming": m.server_streaming(),
                    }),
                );
            }
            services.insert(
                format!("{PACKAGE}.{}", service.name()),
                Value::Object(methods),
            );
        }
    }
    let root = json!({ "messages": messages, "enums": enums, "services": services });
    println!("{}", serde_json::to_string(&root)?);
    Ok(())
}

fn add_message(
    prefix: &str,
    message: &DescriptorProto,
    messages: &mut Map<String, Value>,
    enums: &mut Map<String, Value>,
) {
    let name = format!("{prefix}.{}", message.name());
    let mut fields = Map::new();
    for f in &message.field {
        let oneof = f
            .oneof_index
            .and_then(|i| message.oneof_decl.get(usize::try_from(i).ok()?))
            .map(|o| o.name().to_owned())
            .unwrap_or_default();
        fields.insert(
            f.name().to_owned(),
            json!({
                "number": f.number(),
                "type": f.r#type().as_str_name(),
                "label": f.label().as_str_name(),
                "proto3_optional": f.proto3_optional(),
                "type_name": strip(f.type_name()),
                "oneof": oneof,
            }),
        );
    }
    let map_entry = message.options.as_ref().is_some_and(|o| o.map_entry());
    messages.insert(
        name.clone(),
        json!({ "fields": fields, "map_entry": map_entry }),
    );
    for nested in &message.nested_type {
        add_message(&name, nested, messages, enums);
    }
    for e in &message.enum_type {
        add_enum(&name, e, enums);
    }
}

fn add_enum(prefix: &str, e: &EnumDescriptorProto, enums: &mut Map<String, Value>) {
    let values: Map<String, Value> = e
        .value
        .iter()
        .map(|v| (v.name().to_owned(), json!(v.number())))
        .collect();
    enums.insert(format!("{prefix}.{}", e.name()), Value::Object(values));
}

fn strip(type_name: &str) -> &str {
    type_name.strip_prefix('.').unwrap_or(type_name)
}
