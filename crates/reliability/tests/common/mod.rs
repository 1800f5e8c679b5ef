//! Shared by the reliability tests: where the `comet` binary is and a fresh data directory.

#![allow(dead_code)]

use std::path::PathBuf;

use comet_reliability::serve::default_comet_bin;

/// The `comet` binary of this target directory. `cargo test --workspace` builds it (the comet
/// package's own tests need it); `cargo test -p comet-reliability` alone needs a
/// `cargo build -p comet` first, or `COMET_BIN`.
pub fn comet_bin() -> PathBuf {
    let bin = default_comet_bin();
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p comet` (or set COMET_BIN)",
        bin.display()
    );
    bin
}

pub fn data_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}
