//! comet-remoting: filled in by a later issue.
