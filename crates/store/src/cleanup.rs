//! Retention decisions: when may old CommitLog / ConsumeQueue / IndexFile files be deleted?
//!
//! RocketMQ keeps files for `fileReservedTime` hours, deletes them only during the hours listed in
//! `deleteWhen` (default `"04"`, i.e. 4 am local time, when traffic is low), and overrides both
//! when the disk holding the store fills up: above `diskMaxUsedSpaceRatio` (75 %) expired files go
//! at any hour, above the clean-forcibly ratio (85 %) even unexpired files go, and above the warning
//! ratio (90 %) the disk is "full" and writes are refused.
//!
//! The functions here are pure (they take the clock and the disk figures as arguments) so they can
//! be unit-tested exhaustively; the cleanup service of the message store reads the clock and calls
//! [`disk_usage`] itself and then asks these functions what to do.

use std::path::Path;

use crate::error::StoreError;
use crate::os;

/// Default `fileReservedTime`: files are kept for 72 hours.
pub const DEFAULT_FILE_RESERVED_TIME_HOURS: u32 = 72;
/// Default `deleteWhen`: deletion runs at 4 am local time.
pub const DEFAULT_DELETE_WHEN: &str = "04";
/// Separator between hours in `deleteWhen` (`"04;05"`).
pub const DELETE_WHEN_SEPARATOR: char = ';';
/// Hours in a day; a `deleteWhen` hour must be below this.
pub const HOURS_PER_DAY: u32 = 24;
/// Default `diskMaxUsedSpaceRatio` in percent: above it, expired files are deleted at any hour.
pub const DEFAULT_DISK_MAX_USED_SPACE_RATIO_PERCENT: u32 = 75;
/// Default clean-forcibly ratio: above it, even unexpired files are deleted.
pub const DEFAULT_DISK_SPACE_CLEAN_FORCIBLY_RATIO: f64 = 0.85;
/// Default warning ratio: above it the disk counts as full and writes are refused.
pub const DEFAULT_DISK_SPACE_WARNING_LEVEL_RATIO: f64 = 0.90;
/// Upper bound RocketMQ puts on `diskMaxUsedSpaceRatio` (values above are clamped).
pub const MAX_DISK_MAX_USED_SPACE_RATIO_PERCENT: u32 = 95;
/// Lower bound RocketMQ puts on `diskMaxUsedSpaceRatio` (values below are clamped).
pub const MIN_DISK_MAX_USED_SPACE_RATIO_PERCENT: u32 = 10;
/// At most this many files are deleted per cleanup round, so one round never stalls the disk.
pub const DELETE_FILES_BATCH_MAX: usize = 10;
/// Milliseconds per hour.
pub const MILLIS_PER_HOUR: i64 = 3_600_000;

/// Parses `deleteWhen` (`"04"`, `"04;05"`) into the list of hours (0..=23) it names.
///
/// Empty segments (`"04;"`) are ignored; a segment that is not an hour is an error, so a typo in the
/// configuration is reported at start-up instead of silently disabling retention.
pub fn parse_delete_when(spec: &str) -> Result<Vec<u32>, StoreError> {
    let mut hours = Vec::new();
    for part in spec.split(DELETE_WHEN_SEPARATOR) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let hour: u32 = part
            .parse()
            .map_err(|_| StoreError::Config(format!("deleteWhen: {part:?} is not an hour")))?;
        if hour >= HOURS_PER_DAY {
            return Err(StoreError::Config(format!(
                "deleteWhen: hour {hour} is not in 0..{HOURS_PER_DAY}"
            )));
        }
        hours.push(hour);
    }
    Ok(hours)
}

/// True when `local_hour` is one of the hours in `delete_when`. Unparsable segments never match
/// (like RocketMQ's `UtilAll.isItTimeToDo`).
pub fn is_time_to_delete(delete_when: &str, local_hour: u32) -> bool {
    delete_when
        .split(DELETE_WHEN_SEPARATOR)
        .filter_map(|part| part.trim().parse::<u32>().ok())
        .any(|hour| hour == local_hour)
}

/// `fileReservedTime` hours in milliseconds (saturating).
pub fn file_reserved_millis(reserved_hours: u32) -> i64 {
    i64::from(reserved_hours).saturating_mul(MILLIS_PER_HOUR)
}

/// True when a file last modified at `last_modified_ms` has outlived the reservation at `now_ms`.
pub fn is_file_expired(last_modified_ms: i64, now_ms: i64, reserved_hours: u32) -> bool {
    now_ms >= last_modified_ms.saturating_add(file_reserved_millis(reserved_hours))
}

/// Disk figures of the filesystem holding a path, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskUsage {
    /// Size of the filesystem.
    pub total_bytes: u64,
    /// Free bytes including those reserved for root (Java's `File.getFreeSpace`).
    pub free_bytes: u64,
    /// Bytes an unprivileged process may still use (Java's `File.getUsableSpace`).
    pub available_bytes: u64,
}

impl DiskUsage {
    /// Used fraction `(total - free) / total` as RocketMQ computes it (`0.0..=1.0`); `None` for a
    /// filesystem that reports zero size.
    pub fn used_ratio(&self) -> Option<f64> {
        if self.total_bytes == 0 {
            return None;
        }
        let used = self.total_bytes.saturating_sub(self.free_bytes);
        Some(used as f64 / self.total_bytes as f64)
    }
}

/// Reads the figures of the filesystem holding `path` with `statvfs(3)`.
pub fn disk_usage(path: &Path) -> Result<DiskUsage, StoreError> {
    let space = os::filesystem_space(path).map_err(|e| StoreError::io(path, e))?;
    Ok(DiskUsage {
        total_bytes: space.total_bytes,
        free_bytes: space.free_bytes,
        available_bytes: space.available_bytes,
    })
}

/// The three disk thresholds, as fractions of the filesystem size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DiskThresholds {
    /// `diskMaxUsedSpaceRatio / 100`: above it expired files are deleted at any hour.
    pub max_used_ratio: f64,
    /// Above it even unexpired files are deleted (`cleanImmediately`).
    pub clean_forcibly_ratio: f64,
    /// Above it the disk is full: writes are refused until space is reclaimed.
    pub warning_ratio: f64,
}

impl DiskThresholds {
    /// Builds thresholds from `diskMaxUsedSpaceRatio` in percent, clamped to RocketMQ's 10..=95.
    pub fn from_max_used_percent(percent: u32) -> Self {
        let clamped = percent.clamp(
            MIN_DISK_MAX_USED_SPACE_RATIO_PERCENT,
            MAX_DISK_MAX_USED_SPACE_RATIO_PERCENT,
        );
        DiskThresholds {
            max_used_ratio: f64::from(clamped) / 100.0,
            ..DiskThresholds::default()
        }
    }
}

impl Default for DiskThresholds {
    fn default() -> Self {
        DiskThresholds {
            max_used_ratio: f64::from(DEFAULT_DISK_MAX_USED_SPACE_RATIO_PERCENT) / 100.0,
            clean_forcibly_ratio: DEFAULT_DISK_SPACE_CLEAN_FORCIBLY_RATIO,
            warning_ratio: DEFAULT_DISK_SPACE_WARNING_LEVEL_RATIO,
        }
    }
}

/// How full the store's disk is, relative to [`DiskThresholds`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DiskPressure {
    /// Below the max-used ratio: delete only at `deleteWhen` hours.
    Normal,
    /// Above the max-used ratio: delete expired files now.
    AboveMaxUsed,
    /// Above the clean-forcibly ratio: delete even unexpired files.
    CleanForcibly,
    /// Above the warning ratio: refuse writes and delete forcibly.
    Full,
}

/// Classifies a used ratio. An unknown ratio (`None`, e.g. a zero-sized filesystem or a failed
/// `statvfs`) counts as [`DiskPressure::AboveMaxUsed`], as RocketMQ treats a negative ratio: clean
/// up expired files, but neither refuse writes nor delete unexpired data on a guess.
pub fn assess_disk(used_ratio: Option<f64>, thresholds: &DiskThresholds) -> DiskPressure {
    match used_ratio {
        None => DiskPressure::AboveMaxUsed,
        Some(r) if r > thresholds.warning_ratio => DiskPressure::Full,
        Some(r) if r > thresholds.clean_forcibly_ratio => DiskPressure::CleanForcibly,
        Some(r) if r > thresholds.max_used_ratio => DiskPressure::AboveMaxUsed,
        Some(_) => DiskPressure::Normal,
    }
}

/// What one cleanup round should do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanupDecision {
    /// Run deletion in this round at all.
    pub delete: bool,
    /// Delete files even if they have not expired (disk nearly full).
    pub clean_immediately: bool,
    /// Writes must be refused (disk above the warning ratio).
    pub disk_full: bool,
}

/// Combines the clock, the disk pressure and a manual request into one decision.
///
/// Deletion runs when it is a `deleteWhen` hour, when the disk is above the max-used ratio, or when
/// an operator asked for it (`manual`); unexpired files are deleted only under
/// [`DiskPressure::CleanForcibly`] or worse and only if `clean_file_forcibly_enable`.
pub fn decide(
    delete_when: &str,
    local_hour: u32,
    pressure: DiskPressure,
    manual: bool,
    clean_file_forcibly_enable: bool,
) -> CleanupDecision {
    let time_up = is_time_to_delete(delete_when, local_hour);
    let space_full = pressure >= DiskPressure::AboveMaxUsed;
    CleanupDecision {
        delete: time_up || space_full || manual,
        clean_immediately: clean_file_forcibly_enable && pressure >= DiskPressure::CleanForcibly,
        disk_full: pressure == DiskPressure::Full,
    }
}

/// How many of the oldest files (given oldest first by last-modified time) to delete this round.
///
/// The newest file is never counted (it is the one being written); deletion stops at the first file
/// that must be kept, so only a prefix goes and the remaining files stay contiguous; at most
/// `batch_max` files go per round.
pub fn expired_prefix_len(
    last_modified_ms: &[i64],
    now_ms: i64,
    reserved_hours: u32,
    clean_immediately: bool,
    batch_max: usize,
) -> usize {
    let candidates = last_modified_ms.len().saturating_sub(1);
    last_modified_ms
        .iter()
        .take(candidates.min(batch_max))
        .take_while(|&&modified| {
            clean_immediately || is_file_expired(modified, now_ms, reserved_hours)
        })
        .count()
}

/// The current hour (0..=23) in the process's local time zone, via `localtime_r(3)`; falls back
/// to UTC if the C library cannot convert the time.
pub fn local_hour_now() -> u32 {
    local_hour_of(comet_protocol::time::now_millis().div_euclid(1000))
}

/// The local hour (0..=23) of a Unix time in seconds; UTC if `localtime_r` fails.
pub fn local_hour_of(unix_secs: i64) -> u32 {
    const SECS_PER_HOUR: i64 = 3600;
    const SECS_PER_DAY: i64 = 86_400;
    let utc_hour = u32::try_from(unix_secs.rem_euclid(SECS_PER_DAY) / SECS_PER_HOUR).unwrap_or(0);
    os::local_time(unix_secs)
        .and_then(|local| u32::try_from(local.hour).ok())
        .filter(|h| *h < HOURS_PER_DAY)
        .unwrap_or(utc_hour)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_delete_when() {
        assert_eq!(parse_delete_when("04").ok(), Some(vec![4]));
        assert_eq!(parse_delete_when("04;05").ok(), Some(vec![4, 5]));
        assert_eq!(parse_delete_when(" 4 ; 23 ;").ok(), Some(vec![4, 23]));
        assert!(parse_delete_when("24").is_err());
        assert!(parse_delete_when("four").is_err());
        assert_eq!(parse_delete_when("").ok(), Some(vec![]));
    }

    #[test]
    fn time_to_delete_matches_listed_hours_only() {
        for hour in 0..HOURS_PER_DAY {
            assert_eq!(is_time_to_delete("04", hour), hour == 4, "hour {hour}");
            assert_eq!(is_time_to_delete("04;05", hour), hour == 4 || hour == 5);
            assert!(!is_time_to_delete("x;", hour));
        }
    }

    #[test]
    fn expiry_is_reserved_hours_after_modification() {
        let modified = 1_700_000_000_000;
        let reserve = file_reserved_millis(DEFAULT_FILE_RESERVED_TIME_HOURS);
        assert_eq!(reserve, 72 * 3_600_000);
        assert!(!is_file_expired(modified, modified + reserve - 1, 72));
        assert!(is_file_expired(modified, modified + reserve, 72));
        assert!(is_file_expired(modified, modified, 0));
        assert!(!is_file_expired(i64::MAX - 5, i64::MAX - 1, u32::MAX));
    }

    #[test]
    fn disk_pressure_levels() {
        let t = DiskThresholds::default();
        assert_eq!(assess_disk(Some(0.10), &t), DiskPressure::Normal);
        assert_eq!(assess_disk(Some(0.75), &t), DiskPressure::Normal);
        assert_eq!(assess_disk(Some(0.76), &t), DiskPressure::AboveMaxUsed);
        assert_eq!(assess_disk(Some(0.86), &t), DiskPressure::CleanForcibly);
        assert_eq!(assess_disk(Some(0.91), &t), DiskPressure::Full);
        assert_eq!(assess_disk(None, &t), DiskPressure::AboveMaxUsed);
        let strict = DiskThresholds::from_max_used_percent(5);
        assert!((strict.max_used_ratio - 0.10).abs() < 1e-9);
        let lax = DiskThresholds::from_max_used_percent(99);
        assert!((lax.max_used_ratio - 0.95).abs() < 1e-9);
    }

    #[test]
    fn decisions() {
        let d = decide("04", 3, DiskPressure::Normal, false, true);
        assert_eq!(
            d,
            CleanupDecision {
                delete: false,
                clean_immediately: false,
                disk_full: false
            }
        );
        assert!(decide("04", 4, DiskPressure::Normal, false, true).delete);
        assert!(decide("04", 3, DiskPressure::Normal, true, true).delete);
        let d = decide("04", 3, DiskPressure::AboveMaxUsed, false, true);
        assert!(d.delete && !d.clean_immediately && !d.disk_full);
        let d = decide("04", 3, DiskPressure::CleanForcibly, false, true);
        assert!(d.delete && d.clean_immediately && !d.disk_full);
        let d = decide("04", 3, DiskPressure::Full, false, false);
        assert!(d.delete && !d.clean_immediately && d.disk_full);
    }

    #[test]
    fn expired_prefix_never_takes_the_newest_file() {
        let hour = MILLIS_PER_HOUR;
        let now = 1000 * hour;
        let files = [
            now - 100 * hour,
            now - 80 * hour,
            now - 10 * hour,
            now - 90 * hour,
        ];
        // The third file is young, so deletion stops there even though the fourth is old.
        assert_eq!(expired_prefix_len(&files, now, 72, false, 10), 2);
        assert_eq!(expired_prefix_len(&files, now, 72, false, 1), 1);
        assert_eq!(expired_prefix_len(&files, now, 72, true, 10), 3);
        assert_eq!(expired_prefix_len(&files[..1], now, 72, true, 10), 0);
        assert_eq!(expired_prefix_len(&[], now, 72, true, 10), 0);
    }

    #[test]
    fn statvfs_of_temp_dir() {
        let usage = disk_usage(&std::env::temp_dir());
        let usage = match usage {
            Ok(u) => u,
            Err(e) => panic!("statvfs failed: {e}"),
        };
        assert!(usage.total_bytes > 0);
        assert!(usage.free_bytes <= usage.total_bytes);
        assert!(usage.available_bytes <= usage.free_bytes);
        let ratio = usage.used_ratio();
        assert!(matches!(ratio, Some(r) if (0.0..=1.0).contains(&r)));
        assert!(disk_usage(Path::new("/definitely/not/here")).is_err());
    }

    #[test]
    fn local_hour_is_an_hour() {
        assert!(local_hour_now() < HOURS_PER_DAY);
        assert!(local_hour_of(0) < HOURS_PER_DAY);
        assert!(local_hour_of(i64::MIN) < HOURS_PER_DAY);
    }
}
