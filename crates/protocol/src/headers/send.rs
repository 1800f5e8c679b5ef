//! Send headers: SEND_MESSAGE (10) with long keys, SEND_MESSAGE_V2 (310) /
//! SEND_BATCH_MESSAGE (320) with the single-letter keys `a`..`n`, and the send response.
//!
//! V2 carries exactly V1's fields under short keys, so both decode to the same field set and
//! convert losslessly (`n` is V1's `bname`). Whether a request is a batch is decided by the
//! `batch`/`m` flag, never by the request code. V2 is on every Java produce request, so its parser
//! is hand-written: one pass over the ext fields, matching each key once.

use crate::code::RequestCode;
use crate::command::ExtFields;
use crate::error::{ProtocolError, Result};
use crate::headers::{
    CommandHeader, FieldSpec, HeaderSpec, HeaderValue, RpcHeader, ValueKind, command_header, put,
    put_opt,
};

/// The template topic producers name as `defaultTopic` for auto-creation.
pub use crate::naming::AUTO_CREATE_TOPIC_KEY_TOPIC;
/// `defaultTopicQueueNums` the Java and Go producers send.
pub const DEFAULT_TOPIC_QUEUE_NUMS: i32 = 4;
/// The `MSG_REGION` a broker announces when none is configured.
pub const DEFAULT_MSG_REGION: &str = "DefaultRegion";

command_header! {
    /// SEND_MESSAGE (10) / SEND_REPLY_MESSAGE (324) request, long keys.
    pub struct SendMessageRequestHeader [rpc] {
        req producer_group: String => "producerGroup",
        req topic: String => "topic",
        req default_topic: String => "defaultTopic",
        req default_topic_queue_nums: i32 => "defaultTopicQueueNums",
        /// Negative: the broker picks a queue.
        req queue_id: i32 => "queueId",
        /// MessageSysFlag bits.
        req sys_flag: i32 => "sysFlag",
        req born_timestamp: i64 => "bornTimestamp",
        /// User flag, stored as-is.
        req flag: i32 => "flag",
        /// Properties string.
        opt properties: String => "properties",
        opt reconsume_times: i32 => "reconsumeTimes",
        opt unit_mode: bool => "unitMode",
        /// `true`: the body is a batch.
        opt batch: bool => "batch",
        opt max_reconsume_times: i32 => "maxReconsumeTimes",
    }
}

impl SendMessageRequestHeader {
    /// The body holds several messages in batch encoding.
    pub fn is_batch(&self) -> bool {
        self.batch.unwrap_or(false)
    }

    /// Decodes the header of a send request, picking the key set from the request code:
    /// SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and SEND_REPLY_MESSAGE_V2 use the short keys.
    pub fn decode_for_code(code: i32, ext: &ExtFields) -> Result<Self> {
        match RequestCode::from(code) {
            RequestCode::SendMessageV2
            | RequestCode::SendBatchMessage
            | RequestCode::SendReplyMessageV2 => {
                SendMessageRequestHeaderV2::from_ext_fields(ext).map(Self::from)
            }
            _ => Self::from_ext_fields(ext),
        }
    }
}

/// SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320) / SEND_REPLY_MESSAGE_V2 (325) request: the
/// fields of [`SendMessageRequestHeader`] under keys `a`..`n`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SendMessageRequestHeaderV2 {
    /// `a`
    pub producer_group: String,
    /// `b`
    pub topic: String,
    /// `c`
    pub default_topic: String,
    /// `d`
    pub default_topic_queue_nums: i32,
    /// `e`
    pub queue_id: i32,
    /// `f`
    pub sys_flag: i32,
    /// `g`
    pub born_timestamp: i64,
    /// `h`
    pub flag: i32,
    /// `i`
    pub properties: Option<String>,
    /// `j`
    pub reconsume_times: Option<i32>,
    /// `k`
    pub unit_mode: Option<bool>,
    /// `l`
    pub max_reconsume_times: Option<i32>,
    /// `m`
    pub batch: Option<bool>,
    /// `n`: target broker name (V1 sends it as `bname`).
    pub broker_name: Option<String>,
    /// Inherited keys other than `n` (a JSON-header V2 may carry `ns`, `bname`, ...).
    pub rpc: RpcHeader,
}

impl SendMessageRequestHeaderV2 {
    pub fn is_batch(&self) -> bool {
        self.batch.unwrap_or(false)
    }
}

/// Fields of V2 as parsed, before the required ones are checked.
#[derive(Default)]
struct V2Slots<'a> {
    a: Option<&'a str>,
    b: Option<&'a str>,
    c: Option<&'a str>,
    d: Option<&'a str>,
    e: Option<&'a str>,
    f: Option<&'a str>,
    g: Option<&'a str>,
    h: Option<&'a str>,
    i: Option<&'a str>,
    j: Option<&'a str>,
    k: Option<&'a str>,
    l: Option<&'a str>,
    m: Option<&'a str>,
    n: Option<&'a str>,
    // The RPC keys, read in the same pass (a lookup each cost a scan of all fields).
    ns: Option<&'a str>,
    nsd: Option<&'a str>,
    bname: Option<&'a str>,
    oway: Option<&'a str>,
    lo: Option<&'a str>,
}

fn need<T: HeaderValue>(slot: Option<&str>, key: &'static str) -> Result<T> {
    T::parse(key, slot.ok_or(ProtocolError::MissingField(key))?)
}

fn maybe<T: HeaderValue>(slot: Option<&str>, key: &'static str) -> Result<Option<T>> {
    slot.map(|raw| T::parse(key, raw)).transpose()
}

impl HeaderSpec for SendMessageRequestHeaderV2 {
    const FIELDS: &'static [FieldSpec] = &[
        v2_field("a", ValueKind::Text, true),
        v2_field("b", ValueKind::Text, true),
        v2_field("c", ValueKind::Text, true),
        v2_field("d", ValueKind::Int, true),
        v2_field("e", ValueKind::Int, true),
        v2_field("f", ValueKind::Int, true),
        v2_field("g", ValueKind::Long, true),
        v2_field("h", ValueKind::Int, true),
        v2_field("i", ValueKind::Text, false),
        v2_field("j", ValueKind::Int, false),
        v2_field("k", ValueKind::Bool, false),
        v2_field("l", ValueKind::Int, false),
        v2_field("m", ValueKind::Bool, false),
        v2_field("n", ValueKind::Text, false),
    ];
    const HAS_RPC: bool = true;
}

const fn v2_field(key: &'static str, kind: ValueKind, required: bool) -> FieldSpec {
    FieldSpec {
        key,
        kind,
        required,
    }
}

impl CommandHeader for SendMessageRequestHeaderV2 {
    fn to_ext_fields(&self, ext: &mut ExtFields) {
        put(ext, "a", &self.producer_group);
        put(ext, "b", &self.topic);
        put(ext, "c", &self.default_topic);
        put(ext, "d", &self.default_topic_queue_nums);
        put(ext, "e", &self.queue_id);
        put(ext, "f", &self.sys_flag);
        put(ext, "g", &self.born_timestamp);
        put(ext, "h", &self.flag);
        put_opt(ext, "i", &self.properties);
        put_opt(ext, "j", &self.reconsume_times);
        put_opt(ext, "k", &self.unit_mode);
        put_opt(ext, "l", &self.max_reconsume_times);
        put_opt(ext, "m", &self.batch);
        put_opt(ext, "n", &self.broker_name);
        self.rpc.to_ext_fields(ext);
    }

    fn from_ext_fields(ext: &ExtFields) -> Result<Self> {
        let mut s = V2Slots::default();
        for (key, value) in ext.iter() {
            let v = Some(value);
            match key {
                "a" => s.a = v,
                "b" => s.b = v,
                "c" => s.c = v,
                "d" => s.d = v,
                "e" => s.e = v,
                "f" => s.f = v,
                "g" => s.g = v,
                "h" => s.h = v,
                "i" => s.i = v,
                "j" => s.j = v,
                "k" => s.k = v,
                "l" => s.l = v,
                "m" => s.m = v,
                "n" => s.n = v,
                "ns" => s.ns = v,
                "nsd" => s.nsd = v,
                "bname" => s.bname = v,
                "oway" => s.oway = v,
                "lo" => s.lo = v,
                _ => {}
            }
        }
        Ok(SendMessageRequestHeaderV2 {
            producer_group: need(s.a, "a")?,
            topic: need(s.b, "b")?,
            default_topic: need(s.c, "c")?,
            default_topic_queue_nums: need(s.d, "d")?,
            queue_id: need(s.e, "e")?,
            sys_flag: need(s.f, "f")?,
            born_timestamp: need(s.g, "g")?,
            flag: need(s.h, "h")?,
            properties: maybe(s.i, "i")?,
            reconsume_times: maybe(s.j, "j")?,
            unit_mode: maybe(s.k, "k")?,
            max_reconsume_times: maybe(s.l, "l")?,
            batch: maybe(s.m, "m")?,
            broker_name: maybe(s.n, "n")?,
            rpc: RpcHeader {
                namespace: maybe(s.ns, "ns")?,
                namespaced: maybe(s.nsd, "nsd")?,
                broker_name: maybe(s.bname, "bname")?,
                oneway: maybe(s.oway, "oway")?,
                logical: maybe(s.lo, "lo")?,
            },
        })
    }
}

impl From<SendMessageRequestHeader> for SendMessageRequestHeaderV2 {
    fn from(v1: SendMessageRequestHeader) -> Self {
        SendMessageRequestHeaderV2 {
            producer_group: v1.producer_group,
            topic: v1.topic,
            default_topic: v1.default_topic,
            default_topic_queue_nums: v1.default_topic_queue_nums,
            queue_id: v1.queue_id,
            sys_flag: v1.sys_flag,
            born_timestamp: v1.born_timestamp,
            flag: v1.flag,
            properties: v1.properties,
            reconsume_times: v1.reconsume_times,
            unit_mode: v1.unit_mode,
            max_reconsume_times: v1.max_reconsume_times,
            batch: v1.batch,
            broker_name: v1.rpc.broker_name.clone(),
            rpc: v1.rpc,
        }
    }
}

impl From<SendMessageRequestHeaderV2> for SendMessageRequestHeader {
    fn from(v2: SendMessageRequestHeaderV2) -> Self {
        let mut rpc = v2.rpc;
        if v2.broker_name.is_some() {
            rpc.broker_name = v2.broker_name;
        }
        SendMessageRequestHeader {
            producer_group: v2.producer_group,
            topic: v2.topic,
            default_topic: v2.default_topic,
            default_topic_queue_nums: v2.default_topic_queue_nums,
            queue_id: v2.queue_id,
            sys_flag: v2.sys_flag,
            born_timestamp: v2.born_timestamp,
            flag: v2.flag,
            properties: v2.properties,
            reconsume_times: v2.reconsume_times,
            unit_mode: v2.unit_mode,
            batch: v2.batch,
            max_reconsume_times: v2.max_reconsume_times,
            rpc,
        }
    }
}

command_header! {
    /// Response to a send (and to SEND_REPLY_MESSAGE). The Java client reads `MSG_REGION` and
    /// `TRACE_ON` without a null check on codes 0/10/11/12, so a broker must always fill them:
    /// build it with [`SendMessageResponseHeader::new`].
    pub struct SendMessageResponseHeader {
        /// Offset message id; comma-joined ids for a batch.
        req msg_id: String => "msgId",
        req queue_id: i32 => "queueId",
        /// ConsumeQueue offset of the (first) message.
        req queue_offset: i64 => "queueOffset",
        /// The message's UNIQ_KEY.
        opt transaction_id: String => "transactionId",
        opt batch_uniq_id: String => "batchUniqId",
        opt recall_handle: String => "recallHandle",
        opt msg_region: String => "MSG_REGION",
        opt trace_on: bool => "TRACE_ON",
    }
}

impl SendMessageResponseHeader {
    /// A response header with `MSG_REGION` = `DefaultRegion` and `TRACE_ON` = `true`, as a Java
    /// broker with default settings sends.
    pub fn new(msg_id: impl Into<String>, queue_id: i32, queue_offset: i64) -> Self {
        SendMessageResponseHeader {
            msg_id: msg_id.into(),
            queue_id,
            queue_offset,
            msg_region: Some(DEFAULT_MSG_REGION.to_owned()),
            trace_on: Some(true),
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample_v1() -> SendMessageRequestHeader {
        SendMessageRequestHeader {
            producer_group: "pg".into(),
            topic: "TopicTest".into(),
            default_topic: AUTO_CREATE_TOPIC_KEY_TOPIC.into(),
            default_topic_queue_nums: DEFAULT_TOPIC_QUEUE_NUMS,
            queue_id: 3,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            flag: 0,
            properties: Some("UNIQ_KEY\u{1}ABC\u{2}".into()),
            reconsume_times: Some(0),
            unit_mode: Some(false),
            batch: None,
            max_reconsume_times: None,
            rpc: RpcHeader {
                broker_name: Some("broker-a".into()),
                ..RpcHeader::default()
            },
        }
    }

    #[test]
    fn v1_v2_conversion_is_lossless() {
        let v1 = sample_v1();
        let v2 = SendMessageRequestHeaderV2::from(v1.clone());
        assert_eq!(v2.broker_name.as_deref(), Some("broker-a"));
        assert_eq!(SendMessageRequestHeader::from(v2.clone()), v1);

        let mut ext = ExtFields::new();
        v2.to_ext_fields(&mut ext);
        assert_eq!(ext.get("a"), Some("pg"));
        assert_eq!(ext.get("g"), Some("1700000000000"));
        assert_eq!(ext.get("n"), Some("broker-a"));
        assert_eq!(ext.get("m"), None);
        assert_eq!(
            SendMessageRequestHeaderV2::from_ext_fields(&ext).unwrap(),
            v2
        );
        assert_eq!(
            SendMessageRequestHeader::decode_for_code(310, &ext).unwrap(),
            v1
        );
        assert!(SendMessageRequestHeader::decode_for_code(10, &ext).is_err());
    }

    #[test]
    fn v2_errors_name_the_key() {
        let mut ext = ExtFields::new();
        SendMessageRequestHeaderV2::from(sample_v1()).to_ext_fields(&mut ext);
        ext.remove("e");
        assert_eq!(
            SendMessageRequestHeaderV2::from_ext_fields(&ext),
            Err(ProtocolError::MissingField("e"))
        );
        ext.insert("e", "1");
        ext.insert("m", "maybe");
        assert!(matches!(
            SendMessageRequestHeaderV2::from_ext_fields(&ext),
            Err(ProtocolError::MalformedField { field: "m", .. })
        ));
        ext.insert("m", "true");
        let batch = SendMessageRequestHeader::decode_for_code(320, &ext).unwrap();
        assert!(batch.is_batch());
    }

    #[test]
    fn go_style_v1_request() {
        let ext: ExtFields = [
            ("producerGroup", "pg"),
            ("topic", "T"),
            ("defaultTopic", "TBW102"),
            ("defaultTopicQueueNums", "4"),
            ("queueId", "1"),
            ("sysFlag", "0"),
            ("bornTimestamp", "5"),
            ("flag", "0"),
            ("bname", "broker-a"),
        ]
        .into_iter()
        .collect();
        let h = SendMessageRequestHeader::decode_for_code(10, &ext).unwrap();
        assert_eq!(h.rpc.broker_name.as_deref(), Some("broker-a"));
        assert!(!h.is_batch());
    }

    #[test]
    fn response_always_has_region_and_trace() {
        let mut ext = ExtFields::new();
        SendMessageResponseHeader::new("0A000001", 1, 7).to_ext_fields(&mut ext);
        assert_eq!(ext.get("MSG_REGION"), Some(DEFAULT_MSG_REGION));
        assert_eq!(ext.get("TRACE_ON"), Some("true"));
        assert_eq!(ext.get("queueOffset"), Some("7"));
    }
}
