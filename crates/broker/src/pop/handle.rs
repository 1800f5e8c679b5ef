//! The POP receipt handle and the offset info strings of a POP response, in RocketMQ's
//! `ExtraInfoUtil` text format.
//!
//! A handle (the POP_CK property of a popped message, the `extraInfo` of an ack) is eight
//! space-separated fields: `ckStartOffset popTime invisibleTime reviveQid retryFlag brokerName
//! queueId queueOffset`. The retry flag says which topic the message was read from: `0` the
//! topic itself, `1` the POP retry topic `%RETRY%<group>_<topic>`, `2` the variant
//! `%RETRY%<group>+<topic>`. The response's info strings are `;`-joined items of
//! space-separated fields: `flag qid start` (startOffsetInfo) and `flag qid o1,o2,…`
//! (msgOffsetInfo).

use comet_protocol::naming::RETRY_GROUP_TOPIC_PREFIX;

/// The revive queue id a FIFO pop's handle carries.
pub const FIFO_REVIVE_QID: i32 = 999;

/// Why a receipt handle does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandleError {
    /// Fewer than the seven fields every handle has.
    #[error("receipt handle has {0} fields, at least 7 expected")]
    TooFewFields(usize),
    /// A numeric field is not a number.
    #[error("receipt handle field {field} is not a number: {value:?}")]
    NotANumber {
        /// The field's name.
        field: &'static str,
        /// What was found.
        value: String,
    },
}

/// The retry flag of a topic read by a pop: `1` for a `%RETRY%` topic (`2` for the
/// `<group>+<topic>` form), `0` otherwise.
pub fn retry_flag(topic: &str) -> &'static str {
    match topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) {
        Some(rest) if rest.contains('+') => "2",
        Some(_) => "1",
        None => "0",
    }
}

/// The POP retry topic of `group` reading `topic`: `%RETRY%<group>_<topic>`.
pub fn pop_retry_topic(group: &str, topic: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}")
}

/// The topic a handle's retry flag names, given the topic and group of a request.
pub fn real_topic(topic: &str, group: &str, flag: &str) -> String {
    match flag {
        "1" => pop_retry_topic(group, topic),
        "2" => format!("{RETRY_GROUP_TOPIC_PREFIX}{group}+{topic}"),
        _ => topic.to_owned(),
    }
}

/// A decoded receipt handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptHandle {
    /// First queue offset of the popped batch (the checkpoint's start).
    pub ck_start_offset: i64,
    /// When the batch was popped (ms since the epoch).
    pub pop_time: i64,
    /// How long it stays invisible (ms).
    pub invisible_time: i64,
    /// The revive queue of its checkpoint ([`FIFO_REVIVE_QID`] for FIFO).
    pub revive_qid: i32,
    /// See [`retry_flag`].
    pub retry_flag: String,
    /// The broker that popped it.
    pub broker_name: String,
    /// The queue read.
    pub queue_id: i32,
    /// The message's queue offset; absent from seven-field handles.
    pub queue_offset: Option<i64>,
}

impl ReceiptHandle {
    /// The handle's text, with the queue offset when known.
    pub fn encode(&self) -> String {
        let mut s = format!(
            "{} {} {} {} {} {} {}",
            self.ck_start_offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            self.retry_flag,
            self.broker_name,
            self.queue_id
        );
        if let Some(offset) = self.queue_offset {
            s.push(' ');
            s.push_str(&offset.to_string());
        }
        s
    }

    /// Parses a handle; extra trailing fields (a proxy appends the commit-log offset) are
    /// ignored.
    pub fn decode(text: &str) -> Result<Self, HandleError> {
        let fields: Vec<&str> = text.split(' ').collect();
        if fields.len() < 7 {
            return Err(HandleError::TooFewFields(fields.len()));
        }
        fn num<T: std::str::FromStr>(field: &'static str, v: &str) -> Result<T, HandleError> {
            v.parse().map_err(|_| HandleError::NotANumber {
                field,
                value: v.to_owned(),
            })
        }
        Ok(ReceiptHandle {
            ck_start_offset: num("ckStartOffset", fields[0])?,
            pop_time: num("popTime", fields[1])?,
            invisible_time: num("invisibleTime", fields[2])?,
            revive_qid: num("reviveQid", fields[3])?,
            retry_flag: fields[4].to_owned(),
            broker_name: fields[5].to_owned(),
            queue_id: num("queueId", fields[6])?,
            queue_offset: match fields.get(7) {
                Some(v) => Some(num("queueOffset", v)?),
                None => None,
            },
        })
    }

    /// Whether it comes from a FIFO pop.
    pub fn is_fifo(&self) -> bool {
        self.revive_qid == FIFO_REVIVE_QID
    }
}

/// Appends one `flag qid start` item to a startOffsetInfo string.
pub fn push_start_offset_info(info: &mut String, topic: &str, queue_id: i32, start: i64) {
    if !info.is_empty() {
        info.push(';');
    }
    info.push_str(&format!("{} {queue_id} {start}", retry_flag(topic)));
}

/// Appends one `flag qid o1,o2,…` item to a msgOffsetInfo string.
pub fn push_msg_offset_info(info: &mut String, topic: &str, queue_id: i32, offsets: &[i64]) {
    if !info.is_empty() {
        info.push(';');
    }
    let joined: Vec<String> = offsets.iter().map(i64::to_string).collect();
    info.push_str(&format!(
        "{} {queue_id} {}",
        retry_flag(topic),
        joined.join(",")
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_round_trips_in_apaches_field_order() {
        let h = ReceiptHandle {
            ck_start_offset: 0,
            pop_time: 1_796_411_285_967,
            invisible_time: 30_000,
            revive_qid: 0,
            retry_flag: "0".into(),
            broker_name: "broker-a".into(),
            queue_id: 1,
            queue_offset: Some(2),
        };
        assert_eq!(h.encode(), "0 1796411285967 30000 0 0 broker-a 1 2");
        assert_eq!(ReceiptHandle::decode(&h.encode()).unwrap(), h);
        // A proxy's handle carries the commit-log offset too; it is ignored.
        let proxied = ReceiptHandle::decode("0 1796411285967 30000 0 0 broker-a 1 2 972").unwrap();
        assert_eq!(proxied, h);
        let short = ReceiptHandle::decode("5 1 2 999 1 b 3").unwrap();
        assert_eq!((short.queue_offset, short.is_fifo()), (None, true));
        assert_eq!(
            ReceiptHandle::decode("1 2 3"),
            Err(HandleError::TooFewFields(3))
        );
        assert!(matches!(
            ReceiptHandle::decode("x 1 2 3 0 b 1 2"),
            Err(HandleError::NotANumber {
                field: "ckStartOffset",
                ..
            })
        ));
    }

    #[test]
    fn the_retry_flag_follows_the_topic_read() {
        assert_eq!(retry_flag("T"), "0");
        assert_eq!(retry_flag("%RETRY%g_T"), "1");
        assert_eq!(retry_flag("%RETRY%g+T"), "2");
        assert_eq!(real_topic("T", "g", "1"), "%RETRY%g_T");
        assert_eq!(real_topic("T", "g", "2"), "%RETRY%g+T");
        assert_eq!(real_topic("T", "g", "0"), "T");
    }

    #[test]
    fn info_strings_join_queues_with_semicolons() {
        let mut start = String::new();
        push_start_offset_info(&mut start, "T", 1, 5);
        push_start_offset_info(&mut start, "%RETRY%g_T", 0, 9);
        assert_eq!(start, "0 1 5;1 0 9");
        let mut msgs = String::new();
        push_msg_offset_info(&mut msgs, "T", 1, &[5, 6, 8]);
        push_msg_offset_info(&mut msgs, "T", 2, &[0]);
        assert_eq!(msgs, "0 1 5,6,8;0 2 0");
    }
}
