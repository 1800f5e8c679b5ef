//! comet-store: filled in by a later issue.
