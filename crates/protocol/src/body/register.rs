//! RegisterBrokerBody (REGISTER_BROKER body): the broker's topic table and filter servers.
//!
//! The normal form is JSON. The compressed form is a zlib stream of length-prefixed sections
//! (DataVersion JSON, a count of topic lines `name read write perm filterType [attributesJson]`,
//! the filter-server list JSON and, for 5.x, topic-queue-mapping JSON entries). A 5.x Java broker
//! never flags it correctly (header `compressed=false`), so it is only exchanged between Comet
//! peers; it is implemented for completeness and bounded against decompression bombs.

use std::collections::HashMap;
use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use serde::{Deserialize, Serialize};

use super::lenient::{from_fastjson, to_fastjson, to_fastjson_bytes};
use super::topic::{DataVersion, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType};
use crate::error::{ProtocolError, Result};

/// Largest inflated compressed body accepted (a frame is at most 16 MiB; topic tables compress
/// well, so allow a generous ratio but not an unbounded one).
pub const MAX_INFLATED_REGISTER_BODY: usize = 128 * 1024 * 1024;

/// The REGISTER_BROKER body.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterBrokerBody {
    #[serde(default)]
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
    #[serde(default)]
    pub filter_server_list: Vec<String>,
}

fn body_err(msg: impl Into<String>) -> ProtocolError {
    ProtocolError::Body(msg.into())
}

impl RegisterBrokerBody {
    /// Decodes a body; `compressed` comes from the request header.
    pub fn decode(body: &[u8], compressed: bool) -> Result<Self> {
        if compressed {
            Self::decode_compressed(body)
        } else {
            from_fastjson(body)
        }
    }

    /// Encodes the body, JSON or compressed.
    pub fn encode(&self, compressed: bool) -> Result<Vec<u8>> {
        if compressed {
            self.encode_compressed()
        } else {
            to_fastjson_bytes(self)
        }
    }

    fn encode_compressed(&self) -> Result<Vec<u8>> {
        let wrapper = &self.topic_config_serialize_wrapper;
        let mut raw = Vec::new();
        put_section(&mut raw, to_fastjson(&wrapper.data_version)?.as_bytes())?;
        put_len(&mut raw, wrapper.topic_config_table.len())?;
        let mut names: Vec<&String> = wrapper.topic_config_table.keys().collect();
        names.sort();
        for name in names {
            if let Some(topic) = wrapper.topic_config_table.get(name) {
                put_section(&mut raw, encode_topic_line(topic)?.as_bytes())?;
            }
        }
        put_section(&mut raw, to_fastjson(&self.filter_server_list)?.as_bytes())?;
        let mappings: Vec<&serde_json::Value> = match &wrapper.topic_queue_mapping_info_map {
            Some(serde_json::Value::Object(map)) => map.values().collect(),
            _ => Vec::new(),
        };
        put_len(&mut raw, mappings.len())?;
        for info in mappings {
            put_section(&mut raw, to_fastjson(info)?.as_bytes())?;
        }
        let mut enc = ZlibEncoder::new(Vec::new(), Compression::best());
        enc.write_all(&raw).map_err(|e| body_err(e.to_string()))?;
        enc.finish().map_err(|e| body_err(e.to_string()))
    }

    fn decode_compressed(body: &[u8]) -> Result<Self> {
        let mut raw = Vec::new();
        ZlibDecoder::new(body)
            .take(MAX_INFLATED_REGISTER_BODY as u64 + 1)
            .read_to_end(&mut raw)
            .map_err(|e| body_err(format!("bad compressed register body: {e}")))?;
        if raw.len() > MAX_INFLATED_REGISTER_BODY {
            return Err(ProtocolError::TooLarge {
                what: "inflated register body",
                len: raw.len(),
                max: MAX_INFLATED_REGISTER_BODY,
            });
        }
        let mut r = SectionReader { buf: &raw, pos: 0 };
        let data_version: DataVersion = from_fastjson(r.section("data version")?)?;
        let topic_count = r.count("topic count")?;
        let mut table = HashMap::with_capacity(topic_count);
        for _ in 0..topic_count {
            let topic = decode_topic_line(r.section("topic config")?)?;
            table.insert(topic.topic_name.clone(), topic);
        }
        let filter_server_list: Vec<String> = from_fastjson(r.section("filter server list")?)?;
        // The mapping section is absent in bodies from pre-5.x brokers.
        let mut mapping = serde_json::Map::new();
        if !r.is_empty() {
            let n = r.count("topic queue mapping count")?;
            for _ in 0..n {
                let info: serde_json::Value = from_fastjson(r.section("topic queue mapping")?)?;
                let topic = info
                    .get("topic")
                    .and_then(|t| t.as_str())
                    .unwrap_or_default()
                    .to_owned();
                mapping.insert(topic, info);
            }
        }
        Ok(RegisterBrokerBody {
            topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                topic_config_table: table,
                data_version,
                topic_queue_mapping_info_map: Some(serde_json::Value::Object(mapping)),
                topic_queue_mapping_detail_map: None,
                mapping_data_version: None,
            },
            filter_server_list,
        })
    }
}

/// `name read write perm filterType attributesJson`, space-separated.
fn encode_topic_line(topic: &TopicConfig) -> Result<String> {
    Ok(format!(
        "{} {} {} {} {} {}",
        topic.topic_name,
        topic.read_queue_nums,
        topic.write_queue_nums,
        topic.perm,
        topic.topic_filter_type.name(),
        to_fastjson(&topic.attributes)?
    ))
}

/// Parses a topic line of 5 fields (4.x) or 6 (5.x, with attributes JSON).
fn decode_topic_line(line: &[u8]) -> Result<TopicConfig> {
    let text = std::str::from_utf8(line).map_err(|_| body_err("topic config line is not UTF-8"))?;
    let parts: Vec<&str> = text.splitn(6, ' ').collect();
    let bad = || body_err(format!("malformed topic config line {text:?}"));
    let [name, read, write, perm, filter, rest @ ..] = parts.as_slice() else {
        return Err(bad());
    };
    let int = |s: &str| s.parse::<i32>().map_err(|_| bad());
    let mut topic = TopicConfig::with_queues(*name, int(read)?, int(write)?, int(perm)?);
    topic.topic_filter_type = TopicFilterType::from_name(filter).ok_or_else(bad)?;
    if let Some(attrs) = rest.first() {
        topic.attributes = from_fastjson(attrs.as_bytes())?;
    }
    Ok(topic)
}

fn put_len(out: &mut Vec<u8>, n: usize) -> Result<()> {
    let n = i32::try_from(n).map_err(|_| body_err("register body section too large"))?;
    out.extend_from_slice(&n.to_be_bytes());
    Ok(())
}

fn put_section(out: &mut Vec<u8>, bytes: &[u8]) -> Result<()> {
    put_len(out, bytes.len())?;
    out.extend_from_slice(bytes);
    Ok(())
}

struct SectionReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> SectionReader<'a> {
    fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| body_err(format!("compressed register body truncated in {what}")))?;
        let s = self.buf.get(self.pos..end).unwrap_or_default();
        self.pos = end;
        Ok(s)
    }

    fn int(&mut self, what: &str) -> Result<i32> {
        let b: [u8; 4] = self
            .take(4, what)?
            .try_into()
            .map_err(|_| body_err(format!("short int in {what}")))?;
        Ok(i32::from_be_bytes(b))
    }

    /// A non-negative i32 that cannot exceed the bytes left (each counted item takes ≥ 4 bytes).
    fn count(&mut self, what: &str) -> Result<usize> {
        let v = self.int(what)?;
        let n = usize::try_from(v).map_err(|_| body_err(format!("negative {what} {v}")))?;
        if n > self.buf.len().saturating_sub(self.pos) / 4 + 1 {
            return Err(body_err(format!("{what} {n} exceeds the data")));
        }
        Ok(n)
    }

    fn section(&mut self, what: &str) -> Result<&'a [u8]> {
        let v = self.int(what)?;
        let n = usize::try_from(v).map_err(|_| body_err(format!("negative {what} length {v}")))?;
        self.take(n, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RegisterBrokerBody {
        let mut table = HashMap::new();
        let mut t = TopicConfig::with_queues("TopicTest", 8, 8, 6);
        t.attributes.insert("+message.type".into(), "NORMAL".into());
        table.insert("TopicTest".to_owned(), t);
        table.insert(
            "TBW102".to_owned(),
            TopicConfig::with_queues("TBW102", 8, 8, 7),
        );
        RegisterBrokerBody {
            topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                topic_config_table: table,
                data_version: DataVersion {
                    timestamp: 1_700_000_000_000,
                    counter: 3,
                    state_version: 0,
                },
                ..Default::default()
            },
            filter_server_list: vec![],
        }
    }

    #[test]
    fn json_form() {
        let body = sample();
        let bytes = body.encode(false).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.starts_with(
            r#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3"#
        ));
        assert_eq!(RegisterBrokerBody::decode(&bytes, false).unwrap(), body);
    }

    #[test]
    fn compressed_form_round_trips() {
        let body = sample();
        let bytes = body.encode(true).unwrap();
        let back = RegisterBrokerBody::decode(&bytes, true).unwrap();
        assert_eq!(
            back.topic_config_serialize_wrapper.topic_config_table,
            body.topic_config_serialize_wrapper.topic_config_table
        );
        assert_eq!(back.topic_config_serialize_wrapper.data_version.counter, 3);
    }

    #[test]
    fn four_x_topic_line_and_garbage() {
        let t = decode_topic_line(b"T 4 4 6 SINGLE_TAG").unwrap();
        assert_eq!((t.read_queue_nums, t.perm), (4, 6));
        assert!(decode_topic_line(b"T 4 4").is_err());
        assert!(decode_topic_line(b"T x 4 6 SINGLE_TAG").is_err());
        assert!(RegisterBrokerBody::decode(b"not zlib", true).is_err());
        // valid zlib, truncated payload
        let mut enc = ZlibEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(&[0, 0, 0, 9, b'{']).unwrap();
        assert!(RegisterBrokerBody::decode(&enc.finish().unwrap(), true).is_err());
    }
}
