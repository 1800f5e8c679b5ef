//! Timer messages (RocketMQ 5.x "timer wheel"): messages parked until an arbitrary time.
//!
//! The broker stores a timer message in topic `rmq_sys_wheel_timer`, queue 0, with its slot
//! time in `TIMER_OUT_MS`. This store then *enqueues* each message of that queue, in queue order,
//! into a wheel: the [`TimerLog`] gets one record (CommitLog offset, size, slot time) and the
//! wheel slot of that time points at it; records of one slot are chained backwards, so memory
//! holds one small entry per slot, never per message. A slot of time `t` is *due* once the clock
//! reaches `t + precision` — `TIMER_OUT_MS` is the requested time rounded down, so nothing fires
//! early — and is then *collected*: its chain is read back and handed to the broker, which
//! re-puts each message to its real topic. A message further ahead than the roll window gets a
//! roll record instead, at the window's edge; firing it parks the message again.
//!
//! Progress is the [`TimerCheckpoint`]: the next queue offset to enqueue, the slot time before
//! which everything was delivered, and the log length that goes with them. It is written after
//! the log is synced. On open the log is cut back to that length and the wheel rebuilt from the
//! records of slots not yet delivered; the timer topic is then enqueued again from the
//! checkpoint's offset. A crash therefore re-delivers what was delivered since the last
//! checkpoint (at-least-once) and never loses or advances a message.
//!
//! Disk use follows what is parked: each checkpoint gives back the blocks of the leading log
//! chunks ([`CHUNK_BYTES`]) whose records were all delivered, and empties the log when nothing
//! is parked. Memory is one 24-byte entry per wheel slot (`timerRollWindowSlot` + 60 of them)
//! plus one per live log chunk; the records of a slot are read back only when it fires.

mod checkpoint;
mod log;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::error::{Result, StoreError};
pub use checkpoint::TimerCheckpoint;
pub use log::{CHUNK_BYTES, MAGIC_DEFAULT, MAGIC_ROLL, NO_PREV, TimerLog, TimerRecord, UNIT_SIZE};

/// Directory of the timer log under the store root.
pub const TIMER_LOG_DIR: &str = "timerlog";
/// File name of the timer log.
pub const TIMER_LOG_FILE: &str = "comet-timerlog";
/// File name of the checkpoint, under `<root>/config`.
pub const TIMER_CHECKPOINT_FILE: &str = "comet-timercheck";
/// Slots of the wheel beyond the roll window, so a roll record never shares a slot with a live
/// record of another time.
pub const BLANK_SLOTS: i64 = 60;

/// Timer store settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerConfig {
    /// Width of one slot in ms (`timerPrecisionMs`).
    pub precision_ms: i64,
    /// Slots ahead of the current one a record may be parked in; further messages roll
    /// (`timerRollWindowSlot`).
    pub roll_window_slots: i64,
}

impl Default for TimerConfig {
    fn default() -> Self {
        TimerConfig {
            precision_ms: 1000,
            roll_window_slots: 3600 * 24 * 2,
        }
    }
}

impl TimerConfig {
    fn check(&self) -> Result<()> {
        if self.precision_ms <= 0 || self.roll_window_slots < 2 {
            return Err(StoreError::Config(format!(
                "timer precision {} ms and roll window {} slots must be positive",
                self.precision_ms, self.roll_window_slots
            )));
        }
        Ok(())
    }

    /// Slots of the wheel.
    pub fn wheel_slots(&self) -> i64 {
        self.roll_window_slots + BLANK_SLOTS
    }

    /// `ms` rounded down to a slot time.
    pub fn slot_of(&self, ms: i64) -> i64 {
        ms.div_euclid(self.precision_ms) * self.precision_ms
    }

    /// Index in the wheel of the slot of time `slot_ms`.
    pub fn index_of(&self, slot_ms: i64) -> usize {
        let index = (slot_ms.div_euclid(self.precision_ms)).rem_euclid(self.wheel_slots());
        usize::try_from(index).unwrap_or(0)
    }
}

/// What [`TimerStore::enqueue`] did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// Recorded in the slot of `slot_ms`; `rolled` when that is a roll record at the window's
    /// edge rather than the message's own slot.
    Parked { slot_ms: i64, rolled: bool },
    /// Its slot was already collected: the caller delivers it now.
    Due,
}

/// A collected slot: the records to deliver (or roll), newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueSlot {
    /// The slot's time.
    pub slot_ms: i64,
    /// Its records.
    pub records: Vec<TimerRecord>,
}

/// Figures for monitoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimerStats {
    /// Records parked in slots not yet collected.
    pub parked: u64,
    /// Next slot time to collect.
    pub collect_ms: i64,
    /// Every slot before this time was delivered.
    pub delivered_ms: i64,
    /// Next timer-topic queue offset to enqueue.
    pub enqueue_offset: i64,
    /// Bytes of the timer log.
    pub log_bytes: u64,
    /// Bytes of the timer log before the first record still needed (released).
    pub log_released: u64,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    time_ms: i64,
    last_pos: i64,
    num: u32,
}

const EMPTY_SLOT: Slot = Slot {
    time_ms: -1,
    last_pos: NO_PREV,
    num: 0,
};

#[derive(Debug)]
struct State {
    log: TimerLog,
    wheel: Vec<Slot>,
    collect_ms: i64,
    delivered_ms: i64,
    enqueue_offset: i64,
    parked: u64,
    /// Latest slot time of each log chunk from the first one not released on.
    chunk_latest: VecDeque<i64>,
}

impl State {
    /// Notes a record of `slot_ms` at `pos` in its chunk's latest slot time.
    fn note_chunk(&mut self, pos: i64, slot_ms: i64) {
        let first = self.log.released() / CHUNK_BYTES;
        note_chunk(&mut self.chunk_latest, first, pos, slot_ms);
    }

    /// Releases the leading chunks whose records were all delivered, except the chunk being
    /// written.
    fn release_delivered_chunks(&mut self) {
        let mut released = 0u64;
        while self.chunk_latest.len() > 1
            && self
                .chunk_latest
                .front()
                .is_some_and(|latest| *latest < self.delivered_ms)
        {
            self.chunk_latest.pop_front();
            released += 1;
        }
        if released > 0 {
            let upto = self.log.released() + released * CHUNK_BYTES;
            self.log.release_before(upto);
        }
    }
}

/// The timer log, the wheel over it and the checkpoint (see the module docs).
#[derive(Debug)]
pub struct TimerStore {
    config: TimerConfig,
    checkpoint_path: PathBuf,
    state: Mutex<State>,
}

impl TimerStore {
    /// Opens the timer store under the store root `root` and rebuilds the wheel. `now_ms` is
    /// where collection starts when there is no checkpoint yet.
    pub fn open(root: &Path, config: TimerConfig, now_ms: i64) -> Result<Self> {
        config.check()?;
        let log_dir = root.join(TIMER_LOG_DIR);
        let config_dir = root.join("config");
        for dir in [&log_dir, &config_dir] {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
        }
        let checkpoint_path = config_dir.join(TIMER_CHECKPOINT_FILE);
        let checkpoint = TimerCheckpoint::load(&checkpoint_path)?;
        let (keep, start, collect_ms, enqueue_offset) = match checkpoint {
            Some(c) => (
                c.log_end,
                c.log_start,
                config.slot_of(c.delivered_ms),
                c.enqueue_offset,
            ),
            None => (0, 0, config.slot_of(now_ms), 0),
        };
        let log = TimerLog::open(&log_dir.join(TIMER_LOG_FILE), keep, start)?;
        let slots = usize::try_from(config.wheel_slots())
            .map_err(|_| StoreError::Config("timer wheel too large".into()))?;
        let mut state = State {
            log,
            wheel: vec![EMPTY_SLOT; slots],
            collect_ms,
            delivered_ms: collect_ms,
            enqueue_offset,
            parked: 0,
            chunk_latest: VecDeque::new(),
        };
        rebuild(&config, &mut state)?;
        Ok(TimerStore {
            config,
            checkpoint_path,
            state: Mutex::new(state),
        })
    }

    /// The settings.
    pub fn config(&self) -> &TimerConfig {
        &self.config
    }

    /// Next timer-topic queue offset to enqueue.
    pub fn enqueue_offset(&self) -> i64 {
        self.state.lock().enqueue_offset
    }

    /// Records that every queue offset before `offset` was enqueued or delivered.
    pub fn set_enqueue_offset(&self, offset: i64) {
        let mut state = self.state.lock();
        state.enqueue_offset = state.enqueue_offset.max(offset);
    }

    /// Next slot time to collect.
    pub fn collect_ms(&self) -> i64 {
        self.state.lock().collect_ms
    }

    /// Parks the message at `commit_log_offset` (`size` bytes, queue offset `queue_offset` of
    /// the timer topic) for `deliver_ms`, and records the queue offset as enqueued. A slot
    /// already collected is not written to: the answer is then [`Enqueued::Due`] and the caller
    /// delivers the message and records the offset itself.
    pub fn enqueue(
        &self,
        queue_offset: i64,
        commit_log_offset: i64,
        size: i32,
        deliver_ms: i64,
    ) -> Result<Enqueued> {
        let p = self.config.precision_ms;
        let window = self.config.roll_window_slots;
        let mut state = self.state.lock();
        let mut slot_ms = self.config.slot_of(deliver_ms);
        if slot_ms < state.collect_ms {
            return Ok(Enqueued::Due);
        }
        let mut magic = MAGIC_DEFAULT;
        let ahead = slot_ms - state.collect_ms;
        if ahead >= window * p {
            magic |= MAGIC_ROLL;
            // Just beyond the window: roll to its middle, so the next roll is not due at once.
            slot_ms = if ahead - window * p < window / 3 * p {
                state.collect_ms + window / 2 * p
            } else {
                state.collect_ms + window * p
            };
        }
        let index = self.config.index_of(slot_ms);
        let slot = state.wheel[index];
        let prev_pos = if slot.time_ms == slot_ms {
            slot.last_pos
        } else {
            NO_PREV
        };
        let pos = state.log.append(&TimerRecord {
            slot_ms,
            commit_log_offset,
            size,
            magic,
            prev_pos,
        })?;
        state.note_chunk(pos, slot_ms);
        let num = if slot.time_ms == slot_ms { slot.num } else { 0 };
        state.wheel[index] = Slot {
            time_ms: slot_ms,
            last_pos: pos,
            num: num.saturating_add(1),
        };
        state.parked += 1;
        state.enqueue_offset = state.enqueue_offset.max(queue_offset + 1);
        Ok(Enqueued::Parked {
            slot_ms,
            rolled: magic & MAGIC_ROLL != 0,
        })
    }

    /// Collects the next slot when the clock (`now_ms`) has passed its end: its records, read
    /// back from the log. `None` when no slot is due. The caller delivers them and then calls
    /// [`TimerStore::mark_delivered`].
    pub fn collect_due(&self, now_ms: i64) -> Result<Option<DueSlot>> {
        let p = self.config.precision_ms;
        let mut state = self.state.lock();
        let slot_ms = state.collect_ms;
        if slot_ms + p > now_ms {
            return Ok(None);
        }
        let index = self.config.index_of(slot_ms);
        let slot = state.wheel[index];
        let mut records = Vec::new();
        if slot.time_ms == slot_ms {
            let mut pos = slot.last_pos;
            while pos != NO_PREV {
                let record = state.log.read(pos)?;
                if record.slot_ms != slot_ms || record.prev_pos >= pos {
                    return Err(StoreError::corrupt(
                        "timerlog",
                        pos,
                        format!(
                            "record of slot {} in the chain of {slot_ms}",
                            record.slot_ms
                        ),
                    ));
                }
                pos = record.prev_pos;
                records.push(record);
            }
            state.wheel[index] = EMPTY_SLOT;
            state.parked = state.parked.saturating_sub(records.len() as u64);
        }
        state.collect_ms = slot_ms + p;
        Ok(Some(DueSlot { slot_ms, records }))
    }

    /// Records that every record of the slot `slot_ms` (and of all slots before) was delivered.
    pub fn mark_delivered(&self, slot_ms: i64) {
        let mut state = self.state.lock();
        state.delivered_ms = state.delivered_ms.max(slot_ms + self.config.precision_ms);
    }

    /// Syncs the log and writes the checkpoint. Chunks of the log whose records were all
    /// delivered are released first, and when nothing is parked and nothing is being delivered
    /// the log is emptied, so the log's disk use follows what is parked.
    pub fn checkpoint(&self) -> Result<TimerCheckpoint> {
        let checkpoint = {
            let mut state = self.state.lock();
            if state.parked == 0 && state.delivered_ms == state.collect_ms && state.log.end() > 0 {
                state.log.clear()?;
                state.chunk_latest.clear();
            }
            state.release_delivered_chunks();
            TimerCheckpoint {
                enqueue_offset: state.enqueue_offset,
                delivered_ms: state.delivered_ms,
                log_end: state.log.end(),
                log_start: state.log.released(),
            }
        };
        // Records appended after the snapshot are cut off on the next open and enqueued again.
        self.state.lock().log.sync()?;
        checkpoint.store(&self.checkpoint_path)?;
        Ok(checkpoint)
    }

    /// Figures for monitoring.
    pub fn stats(&self) -> TimerStats {
        let state = self.state.lock();
        TimerStats {
            parked: state.parked,
            collect_ms: state.collect_ms,
            delivered_ms: state.delivered_ms,
            enqueue_offset: state.enqueue_offset,
            log_bytes: state.log.end(),
            log_released: state.log.released(),
        }
    }
}

/// Notes a record of `slot_ms` at `pos` in `chunks`, the latest slot time of each chunk from
/// chunk `first` on.
fn note_chunk(chunks: &mut VecDeque<i64>, first: u64, pos: i64, slot_ms: i64) {
    let chunk = u64::try_from(pos).unwrap_or(0) / CHUNK_BYTES;
    let Ok(index) = usize::try_from(chunk.saturating_sub(first)) else {
        return;
    };
    while chunks.len() <= index {
        chunks.push_back(i64::MIN);
    }
    if let Some(latest) = chunks.get_mut(index) {
        *latest = (*latest).max(slot_ms);
    }
}

/// Links every record of a slot not yet delivered into the wheel, in log order.
fn rebuild(config: &TimerConfig, state: &mut State) -> Result<()> {
    let collect_ms = state.collect_ms;
    let mut wheel = std::mem::take(&mut state.wheel);
    let mut parked = 0u64;
    let mut broken = 0u64;
    let first_chunk = state.log.released() / CHUNK_BYTES;
    let mut chunks = VecDeque::new();
    state.log.scan(|pos, record| {
        if record.slot_ms < collect_ms {
            return;
        }
        note_chunk(&mut chunks, first_chunk, pos, record.slot_ms);
        let slot = &mut wheel[config.index_of(record.slot_ms)];
        if slot.time_ms != record.slot_ms {
            *slot = Slot {
                time_ms: record.slot_ms,
                last_pos: NO_PREV,
                num: 0,
            };
        }
        if record.prev_pos != slot.last_pos {
            broken += 1;
        }
        slot.last_pos = pos;
        slot.num = slot.num.saturating_add(1);
        parked += 1;
    })?;
    state.wheel = wheel;
    state.parked = parked;
    state.chunk_latest = chunks;
    if let Some(end) = state.log.end().checked_sub(1) {
        // The chunk being written is kept even when none of its records is live.
        state.note_chunk(i64::try_from(end).unwrap_or(0), i64::MIN);
    }
    if broken > 0 {
        return Err(StoreError::corrupt(
            "timerlog",
            -1,
            format!("{broken} timer log records do not continue their slot's chain"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
