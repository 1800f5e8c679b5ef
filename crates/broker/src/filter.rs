//! Server-side TAG filtering of pulls.
//!
//! The ConsumeQueue keeps, per message, the Java `String.hashCode()` of its TAGS property (the
//! "tags code"), so the broker can skip non-matching messages without touching the CommitLog: a
//! message matches a subscription when the subscription is `*` or its code set contains the
//! message's code (as an `int`). Hash collisions let a few foreign tags through; clients filter
//! again by the exact tag string, so the broker only has to be fast and never drop a match.
//!
//! SQL92 (property) filtering is not offered (`enablePropertyFilter` is off, as in a default
//! RocketMQ broker); pulls asking for it are refused before reaching the store.

use comet_protocol::body::SubscriptionData;
use comet_protocol::body::heartbeat::{EXPRESSION_TYPE_TAG, SUB_ALL};
use comet_store::MessageFilter;

/// `true` for the TAG expression type (also when the client left it empty).
pub fn is_tag_type(expression_type: Option<&str>) -> bool {
    match expression_type {
        None => true,
        Some(t) => t.is_empty() || t == EXPRESSION_TYPE_TAG,
    }
}

/// A TAG filter built from a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagFilter {
    /// `true` when every message matches (`*`, class-filter mode, or no subscription).
    match_all: bool,
    /// Tag hash codes, sorted for binary search.
    codes: Vec<i32>,
}

impl TagFilter {
    /// The filter of `subscription`. Class-filter mode and non-TAG expressions are treated as
    /// "match everything" here, exactly as RocketMQ's tags-code stage does; callers refuse
    /// expression types the broker cannot evaluate before building a filter.
    pub fn new(subscription: &SubscriptionData) -> Self {
        let match_all = subscription.class_filter_mode
            || !is_tag_type(Some(subscription.expression_type.as_str()))
            || subscription.sub_string.trim() == SUB_ALL
            || subscription.sub_string.trim().is_empty();
        let mut codes = subscription.code_set.clone();
        codes.sort_unstable();
        codes.dedup();
        Self { match_all, codes }
    }

    /// A filter that matches everything.
    pub fn all() -> Self {
        Self {
            match_all: true,
            codes: Vec::new(),
        }
    }

    pub fn is_match_all(&self) -> bool {
        self.match_all
    }

    /// Whether a message with `tags_code` matches. `None` (unknown code, e.g. a timer re-check)
    /// matches, so a held pull is re-run and the store decides.
    pub fn matches(&self, tags_code: Option<i64>) -> bool {
        match tags_code {
            None => true,
            Some(_) if self.match_all => true,
            // The ConsumeQueue widens the i32 hash to i64; Java compares `tagsCode.intValue()`.
            Some(code) => self.codes.binary_search(&(code as i32)).is_ok(),
        }
    }
}

impl MessageFilter for TagFilter {
    fn is_matched_by_consume_queue(&self, tags_code: i64) -> bool {
        self.matches(Some(tags_code))
    }

    fn is_matched_by_commit_log(&self, _record: &[u8]) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use comet_protocol::message::tags_hash;

    #[test]
    fn star_matches_everything_and_tags_match_by_hash() {
        let all = TagFilter::new(&SubscriptionData::from_tag_expression("T", "*", 1));
        assert!(all.is_matched_by_consume_queue(tags_hash("anything")));
        assert!(all.is_matched_by_consume_queue(0));

        let some = TagFilter::new(&SubscriptionData::from_tag_expression(
            "T",
            "TagA || TagB",
            1,
        ));
        assert!(some.is_matched_by_consume_queue(tags_hash("TagA")));
        assert!(some.is_matched_by_consume_queue(tags_hash("TagB")));
        assert!(!some.is_matched_by_consume_queue(tags_hash("TagC")));
        // A message without tags has code 0 and does not match a tag subscription.
        assert!(!some.is_matched_by_consume_queue(0));
        assert!(some.matches(None));
        // A negative hash survives the i64 widening.
        let neg = TagFilter::new(&SubscriptionData::from_tag_expression(
            "T",
            "polygenelubricants",
            1,
        ));
        assert!(neg.is_matched_by_consume_queue(tags_hash("polygenelubricants")));
    }

    #[test]
    fn class_filter_and_other_types_pass_the_tags_stage() {
        let mut sub = SubscriptionData::from_tag_expression("T", "TagA", 1);
        sub.class_filter_mode = true;
        assert!(TagFilter::new(&sub).is_match_all());
        let mut sql = SubscriptionData::from_tag_expression("T", "TagA", 1);
        sql.expression_type = "SQL92".into();
        assert!(TagFilter::new(&sql).is_match_all());
        assert!(is_tag_type(None) && is_tag_type(Some("TAG")) && !is_tag_type(Some("SQL92")));
    }
}
