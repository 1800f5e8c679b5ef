//! Offset commands: consumer offsets (query/update), queue bounds (max/min), search by
//! timestamp, and the earliest store time. Every response carries a single number.

use crate::error::Result;
use crate::headers::{HeaderValue, ValueKind, command_header};

command_header! {
    /// QUERY_CONSUMER_OFFSET (14).
    pub struct QueryConsumerOffsetRequestHeader [rpc] {
        req consumer_group: String => "consumerGroup",
        req topic: String => "topic",
        req queue_id: i32 => "queueId",
        /// 5.x: absent behaves as `true`.
        opt set_zero_if_not_found: bool => "setZeroIfNotFound",
    }
}

command_header! {
    /// Response to QUERY_CONSUMER_OFFSET.
    pub struct QueryConsumerOffsetResponseHeader {
        req offset: i64 => "offset",
    }
}

command_header! {
    /// UPDATE_CONSUMER_OFFSET (15), usually oneway; no response header.
    pub struct UpdateConsumerOffsetRequestHeader [rpc] {
        req consumer_group: String => "consumerGroup",
        req topic: String => "topic",
        req queue_id: i32 => "queueId",
        req commit_offset: i64 => "commitOffset",
    }
}

command_header! {
    /// GET_MAX_OFFSET (30).
    pub struct GetMaxOffsetRequestHeader [rpc] {
        req topic: String => "topic",
        req queue_id: i32 => "queueId",
        /// 5.x: absent means `true` (only committed messages count).
        opt committed: bool => "committed",
    }
}

impl GetMaxOffsetRequestHeader {
    pub fn is_committed(&self) -> bool {
        self.committed.unwrap_or(true)
    }
}

command_header! {
    /// Response to GET_MAX_OFFSET.
    pub struct GetMaxOffsetResponseHeader {
        req offset: i64 => "offset",
    }
}

command_header! {
    /// GET_MIN_OFFSET (31).
    pub struct GetMinOffsetRequestHeader [rpc] {
        req topic: String => "topic",
        req queue_id: i32 => "queueId",
    }
}

command_header! {
    /// Response to GET_MIN_OFFSET.
    pub struct GetMinOffsetResponseHeader {
        req offset: i64 => "offset",
    }
}

/// Which offset SEARCH_OFFSET_BY_TIMESTAMP returns when several messages share the timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BoundaryType {
    /// The first matching offset (default).
    #[default]
    Lower,
    /// The last matching offset.
    Upper,
}

impl HeaderValue for BoundaryType {
    const KIND: ValueKind = ValueKind::OneOf(&["lower", "upper"]);
    /// `lower`/`upper`, any ASCII case.
    fn parse(field: &'static str, raw: &str) -> Result<Self> {
        if raw.eq_ignore_ascii_case("lower") {
            Ok(BoundaryType::Lower)
        } else if raw.eq_ignore_ascii_case("upper") {
            Ok(BoundaryType::Upper)
        } else {
            Err(crate::error::ProtocolError::MalformedField {
                field,
                value: raw.to_owned(),
            })
        }
    }

    fn write_text(&self, out: &mut String) {
        out.push_str(match self {
            BoundaryType::Lower => "lower",
            BoundaryType::Upper => "upper",
        })
    }
}

command_header! {
    /// SEARCH_OFFSET_BY_TIMESTAMP (29).
    pub struct SearchOffsetRequestHeader [rpc] {
        req topic: String => "topic",
        req queue_id: i32 => "queueId",
        req timestamp: i64 => "timestamp",
        opt boundary_type: BoundaryType => "boundaryType",
    }
}

command_header! {
    /// Response to SEARCH_OFFSET_BY_TIMESTAMP.
    pub struct SearchOffsetResponseHeader {
        req offset: i64 => "offset",
    }
}

command_header! {
    /// GET_EARLIEST_MSG_STORETIME (32).
    pub struct GetEarliestMsgStoretimeRequestHeader [rpc] {
        req topic: String => "topic",
        req queue_id: i32 => "queueId",
    }
}

command_header! {
    /// Response to GET_EARLIEST_MSG_STORETIME.
    pub struct GetEarliestMsgStoretimeResponseHeader {
        req timestamp: i64 => "timestamp",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::ExtFields;
    use crate::error::ProtocolError;
    use crate::headers::CommandHeader;

    #[test]
    fn boundary_type_is_case_insensitive() {
        let mut ext: ExtFields = [
            ("topic", "T"),
            ("queueId", "1"),
            ("timestamp", "9"),
            ("boundaryType", "UPPER"),
        ]
        .into_iter()
        .collect();
        let h = SearchOffsetRequestHeader::from_ext_fields(&ext).unwrap();
        assert_eq!(h.boundary_type, Some(BoundaryType::Upper));
        ext.insert("boundaryType", "middle");
        assert!(matches!(
            SearchOffsetRequestHeader::from_ext_fields(&ext),
            Err(ProtocolError::MalformedField {
                field: "boundaryType",
                ..
            })
        ));
    }

    #[test]
    fn committed_defaults_true() {
        let ext: ExtFields = [("topic", "T"), ("queueId", "1")].into_iter().collect();
        assert!(
            GetMaxOffsetRequestHeader::from_ext_fields(&ext)
                .unwrap()
                .is_committed()
        );
    }
}
