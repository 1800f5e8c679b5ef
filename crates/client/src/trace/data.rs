//! Trace records and their text form, byte for byte the Java client's `TraceDataEncoder`.
//!
//! A record is one line of fields separated by [`CONTENT_SPLITOR`] (char 1) and ended by
//! [`FIELD_SPLITOR`] (char 2); a trace message's body is several records one after the other.
//! The field order depends on the record type:
//!
//! | type | fields after the type name |
//! | --- | --- |
//! | `Pub` | timestamp, region, group, topic, msgId, tags, keys, storeHost, bodyLength, costTime, msgType ordinal, offsetMsgId, success |
//! | `SubBefore` | timestamp, region, group, requestId, msgId, retryTimes, keys |
//! | `SubAfter` | requestId, msgId, costTime, success, keys, contextCode, timestamp, group |
//! | `EndTransaction` | timestamp, region, group, topic, msgId, tags, keys, storeHost, msgType ordinal, transactionId, transactionState, fromTransactionCheck |
//! | `Recall` | timestamp, region, group, topic, msgId, success |
//!
//! A missing text value is written `null`, as Java's `StringBuilder` writes a null string.
//! Decoding splits like Java's `String.split`, which drops empty trailing fields, so the optional
//! tail fields (Pub's clientHost from older clients, SubAfter's timestamp and group) are read only
//! when present.

use std::fmt::Write as _;

use thiserror::Error;

/// Separator of the fields of one record (char 1).
pub const CONTENT_SPLITOR: char = '\u{1}';
/// End of one record (char 2).
pub const FIELD_SPLITOR: char = '\u{2}';

/// The text a missing value is encoded as.
const NULL_TEXT: &str = "null";

/// What a trace record describes (Java `TraceType`; the variant names are the wire names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TraceType {
    /// A send and its result.
    Pub,
    /// A recall of a delayed message.
    Recall,
    /// A message handed to the consumer's listener.
    SubBefore,
    /// The listener's verdict on a message.
    SubAfter,
    /// The commit or rollback of a transactional message.
    EndTransaction,
}

impl TraceType {
    /// The wire name (`Pub`, `SubBefore`, ...).
    pub fn name(self) -> &'static str {
        match self {
            TraceType::Pub => "Pub",
            TraceType::Recall => "Recall",
            TraceType::SubBefore => "SubBefore",
            TraceType::SubAfter => "SubAfter",
            TraceType::EndTransaction => "EndTransaction",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        [
            TraceType::Pub,
            TraceType::Recall,
            TraceType::SubBefore,
            TraceType::SubAfter,
            TraceType::EndTransaction,
        ]
        .into_iter()
        .find(|t| t.name() == name)
    }
}

impl std::fmt::Display for TraceType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Kind of the traced message (Java `MessageType`); records carry its ordinal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MessageType {
    /// An ordinary message.
    #[default]
    NormalMsg,
    /// The half of a transactional message.
    TransMsgHalf,
    /// A transactional message's commit.
    TransMsgCommit,
    /// A delayed message.
    DelayMsg,
    /// An ordered message.
    OrderMsg,
}

impl MessageType {
    const ALL: [MessageType; 5] = [
        MessageType::NormalMsg,
        MessageType::TransMsgHalf,
        MessageType::TransMsgCommit,
        MessageType::DelayMsg,
        MessageType::OrderMsg,
    ];

    /// The ordinal written in records.
    pub fn ordinal(self) -> usize {
        self as usize
    }

    /// The type of an ordinal, if it names one.
    pub fn from_ordinal(ordinal: usize) -> Option<Self> {
        Self::ALL.get(ordinal).copied()
    }

    /// The Java constant's name (`Normal_Msg`, `Trans_Msg_Half`, ...).
    pub fn java_name(self) -> &'static str {
        match self {
            MessageType::NormalMsg => "Normal_Msg",
            MessageType::TransMsgHalf => "Trans_Msg_Half",
            MessageType::TransMsgCommit => "Trans_msg_Commit",
            MessageType::DelayMsg => "Delay_Msg",
            MessageType::OrderMsg => "Order_Msg",
        }
    }
}

/// What a record says about one message (Java `TraceBean`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TraceBean {
    /// The message's topic.
    pub topic: String,
    /// The client message id (UNIQ_KEY).
    pub msg_id: String,
    /// The broker's offset message id.
    pub offset_msg_id: String,
    /// The TAGS property; `None` is written `null`.
    pub tags: Option<String>,
    /// The KEYS property (space-separated); `None` is written `null`.
    pub keys: Option<String>,
    /// Address of the broker that stored (or received) the message.
    pub store_host: String,
    /// Address of the client, read only from older clients' Pub records.
    pub client_host: String,
    /// When the broker stored the message (ms); not encoded.
    pub store_time: i64,
    /// How often the message was consumed before.
    pub retry_times: i32,
    /// Body bytes (stored size on the consumer side).
    pub body_length: i32,
    /// The message kind.
    pub msg_type: MessageType,
    /// The transaction's id (EndTransaction).
    pub transaction_id: Option<String>,
    /// The local transaction state's Java name: `COMMIT_MESSAGE`, `ROLLBACK_MESSAGE`, `UNKNOW`.
    pub transaction_state: Option<String>,
    /// Whether the transaction's outcome answered a broker check.
    pub from_transaction_check: bool,
}

/// One trace event (Java `TraceContext`): a send, a consumption step or a transaction end, with
/// the messages it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// The record type.
    pub trace_type: TraceType,
    /// When the event started (ms since the epoch).
    pub time_stamp: i64,
    /// The broker's region (`MSG_REGION`).
    pub region_id: String,
    /// Producer or consumer group, without namespace.
    pub group_name: String,
    /// Milliseconds the step took (per message for a consumed batch).
    pub cost_time: i32,
    /// Whether the send was SEND_OK / the listener accepted the batch.
    pub success: bool,
    /// Id pairing a SubBefore with its SubAfter.
    pub request_id: String,
    /// Java `ConsumeReturnType` ordinal of a SubAfter (0 SUCCESS, 1 TIME_OUT, 2 EXCEPTION,
    /// 3 RETURNNULL, 4 FAILED).
    pub context_code: i32,
    /// The messages; a Pub, EndTransaction or Recall has exactly one.
    pub beans: Vec<TraceBean>,
}

impl TraceContext {
    /// An empty event of `trace_type` at `time_stamp` (success true, as Java's default).
    pub fn new(trace_type: TraceType, time_stamp: i64) -> Self {
        TraceContext {
            trace_type,
            time_stamp,
            region_id: String::new(),
            group_name: String::new(),
            cost_time: 0,
            success: true,
            request_id: String::new(),
            context_code: 0,
            beans: Vec::new(),
        }
    }
}

/// An encoded event: its records and the keys the trace message is indexed under (Java
/// `TraceTransferBean`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TraceTransferBean {
    /// The records, each ended by [`FIELD_SPLITOR`].
    pub data: String,
    /// Every bean's msgId and its keys, without repeats, in first-seen order.
    pub keys: Vec<String>,
}

/// Why trace data could not be decoded.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TraceDecodeError {
    /// A record has fewer fields than its type needs.
    #[error("{trace_type} record has {found} fields, needs at least {needed}")]
    MissingFields {
        /// The record type.
        trace_type: TraceType,
        /// Fields present.
        found: usize,
        /// Fields needed.
        needed: usize,
    },
    /// A numeric field is not a number, or a message type ordinal names no type.
    #[error("{trace_type} record: bad {field} {value:?}")]
    BadNumber {
        /// The record type.
        trace_type: TraceType,
        /// The field's name.
        field: &'static str,
        /// The text found.
        value: String,
    },
}

fn text(value: Option<&str>) -> &str {
    value.unwrap_or(NULL_TEXT)
}

/// Appends `fields` separated by [`CONTENT_SPLITOR`].
fn push_fields(out: &mut String, fields: &[&dyn std::fmt::Display]) {
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.push(CONTENT_SPLITOR);
        }
        let _ = write!(out, "{field}");
    }
}

/// Encodes `ctx` as Java's `TraceDataEncoder.encoderFromContextBean` does (local access channel:
/// SubAfter records carry the timestamp and group). A Pub, EndTransaction or Recall without a
/// bean encodes to no records.
pub fn encode(ctx: &TraceContext) -> TraceTransferBean {
    let mut data = String::with_capacity(256);
    let first = ctx.beans.first();
    match (ctx.trace_type, first) {
        (TraceType::Pub, Some(bean)) => {
            push_fields(
                &mut data,
                &[
                    &ctx.trace_type,
                    &ctx.time_stamp,
                    &ctx.region_id,
                    &ctx.group_name,
                    &bean.topic,
                    &bean.msg_id,
                    &text(bean.tags.as_deref()),
                    &text(bean.keys.as_deref()),
                    &bean.store_host,
                    &bean.body_length,
                    &ctx.cost_time,
                    &bean.msg_type.ordinal(),
                    &bean.offset_msg_id,
                    &ctx.success,
                ],
            );
            data.push(FIELD_SPLITOR);
        }
        (TraceType::SubBefore, _) => {
            for bean in &ctx.beans {
                push_fields(
                    &mut data,
                    &[
                        &ctx.trace_type,
                        &ctx.time_stamp,
                        &ctx.region_id,
                        &ctx.group_name,
                        &ctx.request_id,
                        &bean.msg_id,
                        &bean.retry_times,
                        &text(bean.keys.as_deref()),
                    ],
                );
                data.push(FIELD_SPLITOR);
            }
        }
        (TraceType::SubAfter, _) => {
            for bean in &ctx.beans {
                push_fields(
                    &mut data,
                    &[
                        &ctx.trace_type,
                        &ctx.request_id,
                        &bean.msg_id,
                        &ctx.cost_time,
                        &ctx.success,
                        &text(bean.keys.as_deref()),
                        &ctx.context_code,
                        &ctx.time_stamp,
                        &ctx.group_name,
                    ],
                );
                data.push(FIELD_SPLITOR);
            }
        }
        (TraceType::EndTransaction, Some(bean)) => {
            push_fields(
                &mut data,
                &[
                    &ctx.trace_type,
                    &ctx.time_stamp,
                    &ctx.region_id,
                    &ctx.group_name,
                    &bean.topic,
                    &bean.msg_id,
                    &text(bean.tags.as_deref()),
                    &text(bean.keys.as_deref()),
                    &bean.store_host,
                    &bean.msg_type.ordinal(),
                    &text(bean.transaction_id.as_deref()),
                    &text(bean.transaction_state.as_deref()),
                    &bean.from_transaction_check,
                ],
            );
            data.push(FIELD_SPLITOR);
        }
        (TraceType::Recall, Some(bean)) => {
            push_fields(
                &mut data,
                &[
                    &ctx.trace_type,
                    &ctx.time_stamp,
                    &ctx.region_id,
                    &ctx.group_name,
                    &bean.topic,
                    &bean.msg_id,
                    &ctx.success,
                ],
            );
            data.push(FIELD_SPLITOR);
        }
        _ => {}
    }
    let mut keys: Vec<String> = Vec::new();
    let mut add = |key: &str| {
        if !keys.iter().any(|k| k == key) {
            keys.push(key.to_owned());
        }
    };
    for bean in &ctx.beans {
        add(&bean.msg_id);
        if let Some(bean_keys) = bean.keys.as_deref().filter(|k| !k.is_empty()) {
            // Java's String.split on the separator: inner empty keys stay, trailing ones go.
            for key in java_split(bean_keys, ' ') {
                add(key);
            }
        }
    }
    TraceTransferBean { data, keys }
}

/// Java's `String.split` on one character: empty trailing parts are dropped.
fn java_split(text: &str, separator: char) -> Vec<&str> {
    let mut parts: Vec<&str> = text.split(separator).collect();
    while parts.len() > 1 && parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    if parts.len() == 1 && parts[0].is_empty() && !text.is_empty() {
        parts.clear();
    }
    parts
}

/// Java's `Boolean.parseBoolean`: `true` in any case, anything else false.
fn parse_bool(text: &str) -> bool {
    text.eq_ignore_ascii_case("true")
}

struct Fields<'a> {
    trace_type: TraceType,
    line: Vec<&'a str>,
}

impl<'a> Fields<'a> {
    fn need(&self, needed: usize) -> Result<(), TraceDecodeError> {
        if self.line.len() < needed {
            return Err(TraceDecodeError::MissingFields {
                trace_type: self.trace_type,
                found: self.line.len(),
                needed,
            });
        }
        Ok(())
    }

    fn str(&self, i: usize) -> &'a str {
        self.line.get(i).copied().unwrap_or("")
    }

    fn string(&self, i: usize) -> String {
        self.str(i).to_owned()
    }

    fn num<T: std::str::FromStr>(
        &self,
        i: usize,
        field: &'static str,
    ) -> Result<T, TraceDecodeError> {
        let value = self.str(i);
        value.parse().map_err(|_| TraceDecodeError::BadNumber {
            trace_type: self.trace_type,
            field,
            value: value.to_owned(),
        })
    }

    fn msg_type(&self, i: usize) -> Result<MessageType, TraceDecodeError> {
        let ordinal: usize = self.num(i, "msgType")?;
        MessageType::from_ordinal(ordinal).ok_or_else(|| TraceDecodeError::BadNumber {
            trace_type: self.trace_type,
            field: "msgType",
            value: self.string(i),
        })
    }
}

/// Decodes trace data (a trace message's body) as Java's
/// `TraceDataEncoder.decoderFromTraceDataString` does; records of unknown types are skipped.
pub fn decode(data: &str) -> Result<Vec<TraceContext>, TraceDecodeError> {
    let mut out = Vec::new();
    if data.is_empty() {
        return Ok(out);
    }
    for record in java_split(data, FIELD_SPLITOR) {
        let line = java_split(record, CONTENT_SPLITOR);
        let Some(trace_type) = line.first().and_then(|name| TraceType::from_name(name)) else {
            continue;
        };
        let f = Fields { trace_type, line };
        out.push(match trace_type {
            TraceType::Pub => decode_pub(&f)?,
            TraceType::SubBefore => decode_sub_before(&f)?,
            TraceType::SubAfter => decode_sub_after(&f)?,
            TraceType::EndTransaction => decode_end_transaction(&f)?,
            TraceType::Recall => decode_recall(&f)?,
        });
    }
    Ok(out)
}

fn head(f: &Fields<'_>) -> Result<TraceContext, TraceDecodeError> {
    let mut ctx = TraceContext::new(f.trace_type, f.num(1, "timestamp")?);
    ctx.region_id = f.string(2);
    ctx.group_name = f.string(3);
    Ok(ctx)
}

fn decode_pub(f: &Fields<'_>) -> Result<TraceContext, TraceDecodeError> {
    f.need(13)?;
    let mut ctx = head(f)?;
    let mut bean = TraceBean {
        topic: f.string(4),
        msg_id: f.string(5),
        tags: Some(f.string(6)),
        keys: Some(f.string(7)),
        store_host: f.string(8),
        body_length: f.num(9, "bodyLength")?,
        msg_type: f.msg_type(11)?,
        ..TraceBean::default()
    };
    ctx.cost_time = f.num(10, "costTime")?;
    match f.line.len() {
        13 => ctx.success = parse_bool(f.str(12)),
        n => {
            bean.offset_msg_id = f.string(12);
            ctx.success = parse_bool(f.str(13));
            if n >= 15 {
                bean.client_host = f.string(14);
            }
        }
    }
    ctx.beans.push(bean);
    Ok(ctx)
}

fn decode_sub_before(f: &Fields<'_>) -> Result<TraceContext, TraceDecodeError> {
    f.need(8)?;
    let mut ctx = head(f)?;
    ctx.request_id = f.string(4);
    ctx.beans.push(TraceBean {
        msg_id: f.string(5),
        retry_times: f.num(6, "retryTimes")?,
        keys: Some(f.string(7)),
        ..TraceBean::default()
    });
    Ok(ctx)
}

fn decode_sub_after(f: &Fields<'_>) -> Result<TraceContext, TraceDecodeError> {
    f.need(6)?;
    // Java leaves the timestamp at the decoding time when the record has none; zero here.
    let mut ctx = TraceContext::new(TraceType::SubAfter, 0);
    ctx.request_id = f.string(1);
    ctx.beans.push(TraceBean {
        msg_id: f.string(2),
        keys: Some(f.string(5)),
        ..TraceBean::default()
    });
    ctx.cost_time = f.num(3, "costTime")?;
    ctx.success = parse_bool(f.str(4));
    if f.line.len() >= 7 {
        ctx.context_code = f.num(6, "contextCode")?;
    }
    if f.line.len() >= 9 {
        ctx.time_stamp = f.num(7, "timestamp")?;
        ctx.group_name = f.string(8);
    }
    Ok(ctx)
}

fn decode_end_transaction(f: &Fields<'_>) -> Result<TraceContext, TraceDecodeError> {
    f.need(13)?;
    let mut ctx = head(f)?;
    ctx.beans.push(TraceBean {
        topic: f.string(4),
        msg_id: f.string(5),
        tags: Some(f.string(6)),
        keys: Some(f.string(7)),
        store_host: f.string(8),
        msg_type: f.msg_type(9)?,
        transaction_id: Some(f.string(10)),
        transaction_state: Some(f.string(11)),
        from_transaction_check: parse_bool(f.str(12)),
        ..TraceBean::default()
    });
    Ok(ctx)
}

fn decode_recall(f: &Fields<'_>) -> Result<TraceContext, TraceDecodeError> {
    f.need(7)?;
    let mut ctx = head(f)?;
    ctx.beans.push(TraceBean {
        topic: f.string(4),
        msg_id: f.string(5),
        ..TraceBean::default()
    });
    ctx.success = parse_bool(f.str(6));
    Ok(ctx)
}

#[cfg(test)]
#[path = "data_tests.rs"]
mod tests;
