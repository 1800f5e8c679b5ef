//! comet-namesrv: filled in by a later issue.
