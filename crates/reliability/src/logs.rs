//! Byte-for-byte comparison of two CommitLogs on disk: a slave's must equal its master's over
//! the range both hold. Segment files are named by the 20-digit offset of their first byte, so
//! the same offset lives in the same-named file in both directories. Reads go through the page
//! cache, which the brokers' mappings write into, so a running broker's log can be compared as
//! long as nothing is appended meanwhile.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Bytes compared per read.
const CHUNK: usize = 1 << 20;

/// The segment files of a CommitLog directory by start offset.
pub fn segments(dir: &Path) -> Result<BTreeMap<i64, PathBuf>> {
    let mut out = BTreeMap::new();
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name();
        let Some(start) = name.to_str().and_then(|n| n.parse::<i64>().ok()) else {
            continue;
        };
        out.insert(start, entry.path());
    }
    Ok(out)
}

/// Compares the CommitLogs in directories `a` and `b` over the offsets `from..to`; returns the
/// bytes compared, or a violation naming the first offset where they differ (or a segment only
/// one of them has).
pub fn compare_commit_logs(a: &Path, b: &Path, from: i64, to: i64) -> Result<u64> {
    let (segs_a, segs_b) = (segments(a)?, segments(b)?);
    let mut compared = 0u64;
    let mut next = from;
    while next < to {
        let (start, path_a) = segs_a
            .range(..=next)
            .next_back()
            .ok_or_else(|| missing(a, next))?;
        let path_b = segs_b.get(start).ok_or_else(|| missing(b, next))?;
        let size = file_len(path_a)?;
        let end = start.saturating_add(size).min(to);
        if end <= next {
            return Err(missing(a, next));
        }
        if let Some(at) = compare_range(path_a, path_b, next - start, end - next)? {
            return Err(diverged(a, b, start + at));
        }
        compared += u64::try_from(end - next).unwrap_or(0);
        next = end;
    }
    Ok(compared)
}

fn missing(dir: &Path, offset: i64) -> Error {
    Error::Violation(format!(
        "the CommitLog in {} holds no segment with offset {offset}",
        dir.display()
    ))
}

fn diverged(a: &Path, b: &Path, offset: i64) -> Error {
    Error::Violation(format!(
        "the CommitLogs in {} and {} differ at offset {offset}",
        a.display(),
        b.display()
    ))
}

fn file_len(path: &Path) -> Result<i64> {
    let len = std::fs::metadata(path)
        .map_err(|e| Error::io(path, e))?
        .len();
    Ok(i64::try_from(len).unwrap_or(i64::MAX))
}

/// Compares `len` bytes at `pos` of two files: `Some(at)` when they differ at position `at`.
fn compare_range(a: &Path, b: &Path, pos: i64, len: i64) -> Result<Option<i64>> {
    let open = |path: &Path| -> Result<File> {
        let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
        file.seek(SeekFrom::Start(u64::try_from(pos).unwrap_or(0)))
            .map_err(|e| Error::io(path, e))?;
        Ok(file)
    };
    let (mut fa, mut fb) = (open(a)?, open(b)?);
    let mut buf_a = vec![0u8; CHUNK];
    let mut buf_b = vec![0u8; CHUNK];
    let mut done = 0i64;
    while done < len {
        let n = usize::try_from(len - done).unwrap_or(CHUNK).min(CHUNK);
        fa.read_exact(&mut buf_a[..n])
            .map_err(|e| Error::io(a, e))?;
        fb.read_exact(&mut buf_b[..n])
            .map_err(|e| Error::io(b, e))?;
        if let Some(i) = buf_a[..n].iter().zip(&buf_b[..n]).position(|(x, y)| x != y) {
            return Ok(Some(pos + done + i64::try_from(i).unwrap_or(0)));
        }
        done += i64::try_from(n).unwrap_or(i64::MAX);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_segment(dir: &Path, start: i64, bytes: &[u8]) {
        std::fs::write(dir.join(format!("{start:020}")), bytes).expect("write segment");
    }

    #[test]
    fn equal_logs_compare_and_a_difference_is_located() {
        let (a, b) = (
            tempfile::tempdir().expect("a"),
            tempfile::tempdir().expect("b"),
        );
        let seg0: Vec<u8> = (0..100u8).collect();
        let seg1: Vec<u8> = (100..200u8).collect();
        for dir in [a.path(), b.path()] {
            write_segment(dir, 0, &seg0);
            write_segment(dir, 100, &seg1);
        }
        assert_eq!(
            compare_commit_logs(a.path(), b.path(), 0, 150).ok(),
            Some(150)
        );
        assert_eq!(
            compare_commit_logs(a.path(), b.path(), 30, 200).ok(),
            Some(170)
        );
        let mut bad = seg1.clone();
        bad[42] ^= 1;
        write_segment(b.path(), 100, &bad);
        let err = compare_commit_logs(a.path(), b.path(), 0, 200).expect_err("differs");
        assert!(err.to_string().contains("differ at offset 142"), "{err}");
        assert!(compare_commit_logs(a.path(), b.path(), 0, 142).is_ok());
        write_segment(b.path(), 100, &seg1);
        let err = compare_commit_logs(a.path(), b.path(), 0, 250).expect_err("too far");
        assert!(
            err.to_string().contains("no segment with offset 200"),
            "{err}"
        );
    }
}
