use super::*;

const P: i64 = 1000;
const T0: i64 = 1_700_000_000_000;

fn config(window: i64) -> TimerConfig {
    TimerConfig {
        precision_ms: P,
        roll_window_slots: window,
    }
}

fn open(dir: &Path, window: i64) -> TimerStore {
    TimerStore::open(dir, config(window), T0).unwrap()
}

/// Collects every slot due at `now`, returning (slot, commit log offset, roll) triples.
fn drain(store: &TimerStore, now: i64) -> Vec<(i64, i64, bool)> {
    let mut out = Vec::new();
    while let Some(due) = store.collect_due(now).unwrap() {
        for r in due.records.iter().rev() {
            out.push((due.slot_ms, r.commit_log_offset, r.is_roll()));
        }
        store.mark_delivered(due.slot_ms);
    }
    out
}

#[test]
fn slot_math_rounds_down_and_wraps() {
    let c = config(100);
    assert_eq!(c.wheel_slots(), 160);
    assert_eq!(c.slot_of(T0 + 999), T0);
    assert_eq!(c.slot_of(T0 + 1000), T0 + 1000);
    assert_eq!(c.slot_of(-1), -1000);
    assert_eq!(c.index_of(T0), c.index_of(T0 + 160 * P));
    assert_ne!(c.index_of(T0), c.index_of(T0 + 159 * P));
    assert_eq!(c.index_of(T0 + 1), c.index_of(T0));
}

#[test]
fn a_slot_fires_only_after_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 100);
    assert_eq!(
        s.enqueue(0, 100, 10, T0 + 3000).unwrap(),
        Enqueued::Parked {
            slot_ms: T0 + 3000,
            rolled: false
        }
    );
    s.enqueue(1, 200, 10, T0 + 3500).unwrap();
    s.enqueue(2, 300, 10, T0 + 5000).unwrap();
    assert_eq!(s.stats().parked, 3);
    assert_eq!(s.enqueue_offset(), 3);
    assert!(drain(&s, T0 + 3999).is_empty());
    assert_eq!(
        drain(&s, T0 + 4000),
        vec![(T0 + 3000, 100, false), (T0 + 3000, 200, false)]
    );
    assert_eq!(s.stats().parked, 1);
    assert_eq!(drain(&s, T0 + 6000), vec![(T0 + 5000, 300, false)]);
    assert_eq!(s.stats().parked, 0);
}

#[test]
fn an_already_collected_slot_is_due_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 100);
    drain(&s, T0 + 5000);
    assert_eq!(s.collect_ms(), T0 + 5000);
    assert_eq!(s.enqueue(0, 1, 1, T0 + 4999).unwrap(), Enqueued::Due);
    assert_eq!(
        s.enqueue_offset(),
        0,
        "the caller records a due message's offset"
    );
    assert!(matches!(
        s.enqueue(1, 2, 1, T0 + 5000).unwrap(),
        Enqueued::Parked { .. }
    ));
}

#[test]
fn messages_beyond_the_window_roll() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 90);
    // Well beyond the window: rolled to its edge.
    assert_eq!(
        s.enqueue(0, 1, 1, T0 + 500 * P).unwrap(),
        Enqueued::Parked {
            slot_ms: T0 + 90 * P,
            rolled: true
        }
    );
    // Just beyond it: rolled to its middle.
    assert_eq!(
        s.enqueue(1, 2, 1, T0 + 100 * P).unwrap(),
        Enqueued::Parked {
            slot_ms: T0 + 45 * P,
            rolled: true
        }
    );
    // Inside it: its own slot.
    assert_eq!(
        s.enqueue(2, 3, 1, T0 + 89 * P).unwrap(),
        Enqueued::Parked {
            slot_ms: T0 + 89 * P,
            rolled: false
        }
    );
    let fired = drain(&s, T0 + 91 * P);
    assert_eq!(
        fired,
        vec![
            (T0 + 45 * P, 2, true),
            (T0 + 89 * P, 3, false),
            (T0 + 90 * P, 1, true)
        ]
    );
}

#[test]
fn the_wheel_survives_a_reopen_after_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path(), 100);
        for i in 0..50 {
            s.enqueue(i, 1000 + i, 10, T0 + (i % 5) * P + 7).unwrap();
        }
        assert_eq!(drain(&s, T0 + P).len(), 10);
        s.checkpoint().unwrap();
    }
    let s = open(dir.path(), 100);
    assert_eq!(s.enqueue_offset(), 50);
    assert_eq!(s.collect_ms(), T0 + P);
    assert_eq!(s.stats().parked, 40);
    let fired = drain(&s, T0 + 5 * P);
    assert_eq!(fired.len(), 40);
    for (slot, offset, _) in fired {
        assert_eq!(slot, T0 + ((offset - 1000) % 5) * P);
    }
}

#[test]
fn recovery_redelivers_since_the_checkpoint_and_drops_later_records() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path(), 100);
        s.enqueue(0, 10, 1, T0).unwrap();
        s.enqueue(1, 11, 1, T0 + P).unwrap();
        s.enqueue(2, 12, 1, T0 + 2 * P).unwrap();
        assert_eq!(drain(&s, T0 + P).len(), 1);
        let c = s.checkpoint().unwrap();
        assert_eq!(
            (c.enqueue_offset, c.delivered_ms, c.log_end),
            (3, T0 + P, 3 * UNIT_SIZE)
        );
        // After the checkpoint: a slot delivered and a record enqueued, then a crash.
        assert_eq!(drain(&s, T0 + 2 * P).len(), 1);
        s.enqueue(3, 13, 1, T0 + 4 * P).unwrap();
    }
    let s = open(dir.path(), 100);
    assert_eq!(s.enqueue_offset(), 3, "queue offset 3 is enqueued again");
    assert_eq!(s.stats().log_bytes, 3 * UNIT_SIZE, "its record was cut off");
    // The slot delivered after the checkpoint fires again (a duplicate), nothing is lost.
    assert_eq!(
        drain(&s, T0 + 3 * P),
        vec![(T0 + P, 11, false), (T0 + 2 * P, 12, false)]
    );
    s.enqueue(3, 13, 1, T0 + 4 * P).unwrap();
    assert_eq!(drain(&s, T0 + 5 * P), vec![(T0 + 4 * P, 13, false)]);
}

#[test]
fn without_a_checkpoint_everything_is_enqueued_again() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path(), 100);
        s.enqueue(0, 10, 1, T0 + P).unwrap();
    }
    let s = open(dir.path(), 100);
    assert_eq!(
        (s.enqueue_offset(), s.stats().parked, s.stats().log_bytes),
        (0, 0, 0)
    );
}

#[test]
fn an_idle_checkpoint_empties_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 100);
    s.enqueue(0, 10, 1, T0).unwrap();
    assert_eq!(s.checkpoint().unwrap().log_end, UNIT_SIZE);
    assert_eq!(drain(&s, T0 + P).len(), 1);
    let c = s.checkpoint().unwrap();
    assert_eq!((c.log_end, c.enqueue_offset), (0, 1));
    drop(s);
    let s = open(dir.path(), 100);
    assert_eq!(s.stats().parked, 0);
    assert!(drain(&s, T0 + 2 * P).is_empty());
}

#[test]
fn a_damaged_checkpoint_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path(), 100));
    std::fs::write(
        dir.path().join("config").join(TIMER_CHECKPOINT_FILE),
        "enqueueOffset=x\n",
    )
    .unwrap();
    assert!(TimerStore::open(dir.path(), config(100), T0).is_err());
}

#[test]
fn delivered_chunks_are_released_and_skipped_on_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let per_chunk = i64::try_from(CHUNK_BYTES / UNIT_SIZE).unwrap();
    let mut offset = 0;
    {
        let s = open(dir.path(), 100);
        // Chunk 0: slot T0; chunk 1: slot T0 + 50 s; then a few of slot T0 + 2 s in chunk 2.
        for (count, at) in [(per_chunk, T0), (per_chunk, T0 + 50 * P), (10, T0 + 2 * P)] {
            for _ in 0..count {
                s.enqueue(offset, offset, 1, at).unwrap();
                offset += 1;
            }
        }
        assert_eq!(drain(&s, T0 + P).len(), usize::try_from(per_chunk).unwrap());
        let c = s.checkpoint().unwrap();
        assert_eq!(c.log_start, CHUNK_BYTES, "chunk 0 was all delivered");
        assert_eq!(s.stats().log_released, CHUNK_BYTES);
        // Nothing more is delivered, so nothing more is released.
        assert_eq!(s.checkpoint().unwrap().log_start, CHUNK_BYTES);
    }
    let s = open(dir.path(), 100);
    assert_eq!(s.stats().log_released, CHUNK_BYTES);
    assert_eq!(s.stats().parked, u64::try_from(per_chunk + 10).unwrap());
    let fired = drain(&s, T0 + 3 * P);
    assert_eq!(fired.len(), 10);
    assert!(fired.iter().all(|(slot, _, _)| *slot == T0 + 2 * P));
    assert_eq!(
        drain(&s, T0 + 51 * P).len(),
        usize::try_from(per_chunk).unwrap()
    );
    // Everything delivered: the next checkpoint empties the log.
    let c = s.checkpoint().unwrap();
    assert_eq!((c.log_end, c.log_start), (0, 0));
    assert_eq!(c.enqueue_offset, offset);
}
