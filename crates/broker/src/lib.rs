//! comet-broker: filled in by a later issue.
