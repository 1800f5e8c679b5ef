//! `timercheck`: how far the timer store got, written after the timer log is synced.
//!
//! Four numbers, as `key=value` lines: the next timer-topic queue offset to enqueue, the slot
//! time up to which every slot was delivered, the timer log length they refer to, and where the
//! log's needed records start. The file
//! is replaced atomically (written beside, synced, renamed).

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::error::{Result, StoreError};

/// The timer store's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimerCheckpoint {
    /// Next queue offset of the timer topic to enqueue.
    pub enqueue_offset: i64,
    /// Every slot before this time (ms) was delivered.
    pub delivered_ms: i64,
    /// Timer log bytes the two numbers above account for.
    pub log_end: u64,
    /// Timer log bytes before this were released: no record there is needed any more.
    pub log_start: u64,
}

impl TimerCheckpoint {
    /// Reads the checkpoint; `None` when there is none yet.
    pub fn load(path: &Path) -> Result<Option<Self>> {
        let text = match fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::io(path, e)),
        };
        let mut enqueue_offset = None;
        let mut delivered_ms = None;
        let mut log_end = None;
        let mut log_start = 0;
        for line in text.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let bad = || StoreError::corrupt(path, 0, format!("bad value of {key}: {value:?}"));
            match key.trim() {
                "enqueueOffset" => enqueue_offset = Some(value.trim().parse().map_err(|_| bad())?),
                "deliveredMs" => delivered_ms = Some(value.trim().parse().map_err(|_| bad())?),
                "logEnd" => log_end = Some(value.trim().parse().map_err(|_| bad())?),
                "logStart" => log_start = value.trim().parse().map_err(|_| bad())?,
                _ => {}
            }
        }
        match (enqueue_offset, delivered_ms, log_end) {
            (Some(enqueue_offset), Some(delivered_ms), Some(log_end)) => {
                Ok(Some(TimerCheckpoint {
                    enqueue_offset,
                    delivered_ms,
                    log_end,
                    log_start,
                }))
            }
            _ => Err(StoreError::corrupt(path, 0, "timer checkpoint lacks a key")),
        }
    }

    /// Replaces the checkpoint file.
    pub fn store(&self, path: &Path) -> Result<()> {
        let tmp = path.with_extension("tmp");
        let text = format!(
            "enqueueOffset={}\ndeliveredMs={}\nlogEnd={}\nlogStart={}\n",
            self.enqueue_offset, self.delivered_ms, self.log_end, self.log_start
        );
        let mut file = fs::File::create(&tmp).map_err(|e| StoreError::io(&tmp, e))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| StoreError::io(&tmp, e))?;
        fs::rename(&tmp, path).map_err(|e| StoreError::io(path, e))?;
        if let Some(dir) = path.parent() {
            fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| StoreError::io(dir, e))?;
        }
        Ok(())
    }
}
