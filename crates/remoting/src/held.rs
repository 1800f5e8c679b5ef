//! Responses a server connection's writer holds back until its fence releases them.
//!
//! A processor may answer before what the answer claims is true, marking the response with a
//! [`ResponseHold`]: the broker answers a SYNC_FLUSH send as soon as its record is appended, with
//! `until` = the end of the record, and the writer keeps the answer here until the fence reports
//! the CommitLog flushed that far ([`crate::ResponseFence::released`]). That replaces a task per
//! waiting send (spawned, woken by the flush thread, polled, then queueing its answer) with one
//! wake-up of the writer per group commit, and the answers one commit released leave in one
//! write.
//!
//! A response still held after the fence's hold timeout leaves with the hold's expired code (the
//! broker: FLUSH_DISK_TIMEOUT, what a send waiting that long answered before). The timeout is
//! asked of the fence as responses are held, so a change of it (the broker's `syncFlushTimeout`
//! or `slaveTimeout`) applies to the responses held from then on. Held responses stay
//! charged to the connection's write budget until written, so a connection whose answers pile up
//! behind a stalled disk stops being read like one whose peer stops reading: the number held is
//! bounded by the budget's high-water mark.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::channel::WriteBudget;
use crate::codec::{Frame, recode};
use crate::processor::ResponseFence;

/// One response waiting for its hold.
#[derive(Debug)]
struct Held {
    frame: Frame,
    until: u64,
    expired_code: i32,
    deadline: Instant,
}

/// How long a response held now may stay held.
type HoldTimeout = Box<dyn Fn() -> Duration + Send + Sync>;

/// The held responses of one connection, by ascending deadline (the order they were held while
/// the timeout does not change).
pub(crate) struct HeldResponses {
    frames: VecDeque<Held>,
    /// `None` without a fence that releases, or once its sender is gone (the store stopped):
    /// everything held then expires.
    released: Option<watch::Receiver<u64>>,
    timeout: HoldTimeout,
}

impl HeldResponses {
    /// Responses waiting for `released`, each for at most what `timeout` says as it is held.
    pub(crate) fn new(
        released: Option<watch::Receiver<u64>>,
        timeout: impl Fn() -> Duration + Send + Sync + 'static,
    ) -> Self {
        Self {
            frames: VecDeque::new(),
            released,
            timeout: Box::new(timeout),
        }
    }

    /// Responses waiting for what `fence` releases, for its hold timeout (without a fence a
    /// held response leaves at once with its expired code).
    pub(crate) fn of_fence(fence: Option<&Arc<dyn ResponseFence>>) -> Self {
        let released = fence.and_then(|f| f.released());
        let fence = fence.cloned();
        Self::new(released, move || {
            fence.as_ref().map_or(Duration::ZERO, |f| f.hold_timeout())
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The released position now, marking it seen so [`HeldResponses::ready`] waits for the
    /// next one. `None` when nothing releases.
    fn released_now(&mut self) -> Option<u64> {
        self.released.as_mut().map(|rx| *rx.borrow_and_update())
    }

    /// Moves the frames of `batch` whose hold is not yet released out of it, to be written by
    /// [`HeldResponses::take_ready`] later. A frame whose hold nothing can release stays in
    /// `batch`, recoded with its expired code.
    pub(crate) fn admit(
        &mut self,
        batch: &mut Vec<Frame>,
        budget: &WriteBudget,
        on_expired: impl Fn(u64),
    ) {
        if batch.iter().all(|f| f.hold.is_none()) {
            return;
        }
        let released = self.released_now();
        let deadline = Instant::now() + (self.timeout)();
        let mut i = 0;
        while i < batch.len() {
            let Some(hold) = batch[i].hold else {
                i += 1;
                continue;
            };
            match released {
                Some(at) if at >= hold.until => {
                    batch[i].hold = None;
                    i += 1;
                }
                Some(_) => {
                    let frame = batch.remove(i);
                    // At the back unless the timeout was shortened since the last ones.
                    let at = self.frames.partition_point(|h| h.deadline <= deadline);
                    self.frames.insert(
                        at,
                        Held {
                            frame,
                            until: hold.until,
                            expired_code: hold.expired_code,
                            deadline,
                        },
                    );
                }
                None => {
                    on_expired(hold.until);
                    match expire(&batch[i], hold.expired_code, budget) {
                        Some(recoded) => {
                            batch[i] = recoded;
                            i += 1;
                        }
                        None => {
                            batch.remove(i);
                        }
                    }
                }
            }
        }
    }

    /// Completes once a held response may leave: the released position moved (or its sender is
    /// gone) or the oldest deadline passed. Pending for ever while nothing is held.
    pub(crate) fn ready(&mut self) -> impl Future<Output = ()> + '_ {
        let deadline = self.frames.front().map(|h| h.deadline);
        let released = self.released.as_mut();
        async move {
            let Some(deadline) = deadline else {
                return std::future::pending().await;
            };
            // Without a release, everything held expires now.
            if let Some(rx) = released {
                tokio::select! {
                    _ = rx.changed() => {}
                    () = tokio::time::sleep_until(deadline) => {}
                }
            }
        }
    }

    /// Appends to `batch` every held response that may leave now: released ones as they are,
    /// expired ones recoded (`on_expired` called with each one's `until`). Takes at most
    /// `room` frames.
    pub(crate) fn take_ready(
        &mut self,
        batch: &mut Vec<Frame>,
        room: usize,
        budget: &WriteBudget,
        on_expired: impl Fn(u64),
    ) {
        if self.frames.is_empty() {
            return;
        }
        let sender_gone = self
            .released
            .as_ref()
            .is_some_and(|rx| rx.has_changed().is_err());
        let released = self.released_now();
        self.release_up_to(released, batch, room);
        if sender_gone {
            // What it released last still counted; nothing more will come.
            self.released = None;
        }
        let now = Instant::now();
        let everything_expires = self.released.is_none();
        while batch.len() < room {
            let Some(front) = self.frames.front() else {
                break;
            };
            if !everything_expires && front.deadline > now {
                break;
            }
            let Some(held) = self.frames.pop_front() else {
                break;
            };
            on_expired(held.until);
            batch.extend(expire(&held.frame, held.expired_code, budget));
        }
    }

    fn release_up_to(&mut self, released: Option<u64>, batch: &mut Vec<Frame>, room: usize) {
        let Some(at) = released else {
            return;
        };
        let mut i = 0;
        while i < self.frames.len() && batch.len() < room {
            if self.frames[i].until <= at {
                if let Some(mut held) = self.frames.remove(i) {
                    held.frame.hold = None;
                    batch.push(held.frame);
                }
            } else {
                i += 1;
            }
        }
    }
}

/// `frame` answered with `code` instead; the budget is charged the difference in length. A
/// head that cannot be decoded again (never: the transport encoded it) is dropped with its
/// budget rather than sent with a code that claims what did not happen: the peer's call times
/// out, as when the connection closes.
fn expire(frame: &Frame, code: i32, budget: &WriteBudget) -> Option<Frame> {
    budget.release(frame.len());
    match recode(frame, code) {
        Ok(recoded) => {
            budget.add(recoded.len());
            Some(recoded)
        }
        Err(e) => {
            tracing::error!(error = %e, "held response cannot be recoded; dropped");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::encode_split;
    use comet_protocol::{RemotingCommand, ResponseHold};

    fn budget() -> WriteBudget {
        WriteBudget::new(1 << 20)
    }

    fn response(opaque: i32, until: Option<u64>) -> Frame {
        let mut cmd = RemotingCommand::response(0, None);
        cmd.opaque = opaque;
        cmd.ext_mut().insert("msgId", "ABC");
        cmd.hold = until.map(|until| ResponseHold {
            until,
            expired_code: 10,
        });
        encode_split(cmd).unwrap_or_else(|e| panic!("{e}"))
    }

    fn decoded(frame: &Frame) -> RemotingCommand {
        comet_protocol::frame::decode(frame.head.slice(4..)).unwrap_or_else(|e| panic!("{e}"))
    }

    fn opaques(batch: &[Frame]) -> Vec<i32> {
        batch.iter().map(|f| decoded(f).opaque).collect()
    }

    #[tokio::test]
    async fn held_responses_leave_once_released_in_any_order_of_until() {
        let (tx, rx) = watch::channel(10u64);
        let mut held = HeldResponses::new(Some(rx), || Duration::from_secs(60));
        let budget = budget();
        let never = |u: u64| panic!("expired {u}");
        let mut batch = vec![
            response(1, Some(10)),
            response(2, Some(30)),
            response(3, None),
            response(4, Some(20)),
        ];
        held.admit(&mut batch, &budget, never);
        assert_eq!(opaques(&batch), [1, 3], "released and plain ones stay");
        assert!(batch.iter().all(|f| f.hold.is_none()));
        batch.clear();

        tx.send_replace(20);
        tokio::time::timeout(Duration::from_secs(1), held.ready())
            .await
            .unwrap_or_else(|_| panic!("a release wakes the writer"));
        held.take_ready(&mut batch, 16, &budget, never);
        assert_eq!(opaques(&batch), [4]);
        batch.clear();
        held.take_ready(&mut batch, 16, &budget, never);
        assert!(
            batch.is_empty(),
            "nothing more released, no deadline passed"
        );
        // Nothing new released: waiting goes on.
        assert!(
            tokio::time::timeout(Duration::from_millis(10), held.ready())
                .await
                .is_err()
        );
        tx.send_replace(30);
        held.ready().await;
        held.take_ready(&mut batch, 16, &budget, never);
        assert_eq!(opaques(&batch), [2]);
        assert!(held.is_empty());
    }

    #[tokio::test]
    async fn a_response_held_past_the_timeout_leaves_with_its_expired_code() {
        let (_tx, rx) = watch::channel(0u64);
        let mut held = HeldResponses::new(Some(rx), || Duration::from_millis(30));
        let budget = budget();
        let mut batch = vec![response(7, Some(100))];
        let charged = batch[0].len();
        budget.add(charged);
        held.admit(&mut batch, &budget, |u| panic!("expired {u}"));
        assert!(batch.is_empty());
        let expired = std::sync::Mutex::new(Vec::new());
        let note = |u: u64| expired.lock().unwrap_or_else(|e| e.into_inner()).push(u);
        // `ready` completes at the deadline.
        held.ready().await;
        held.take_ready(&mut batch, 16, &budget, note);
        assert_eq!(*expired.lock().unwrap_or_else(|e| e.into_inner()), [100]);
        let answer = decoded(&batch[0]);
        assert_eq!((answer.code, answer.opaque), (10, 7));
        assert_eq!(
            answer
                .ext_fields
                .and_then(|e| e.get("msgId").map(str::to_owned))
                .as_deref(),
            Some("ABC")
        );
        assert_eq!(
            u32::from_be_bytes([
                batch[0].head[0],
                batch[0].head[1],
                batch[0].head[2],
                batch[0].head[3]
            ]) as usize,
            batch[0].len() - 4,
            "length prefix of the recoded frame"
        );
        budget.release(batch[0].len());
        assert_eq!(budget.queued(), 0, "the budget follows the recoded length");
    }

    #[tokio::test]
    async fn without_a_release_everything_held_expires_at_once() {
        let budget = budget();
        let mut held = HeldResponses::new(None, || Duration::from_secs(5));
        let mut batch = vec![response(1, Some(1)), response(2, None)];
        held.admit(&mut batch, &budget, |_| {});
        assert_eq!(
            batch.iter().map(|f| decoded(f).code).collect::<Vec<_>>(),
            [10, 0]
        );

        // The sender goes away while responses are held: what it released last still counts.
        let (tx, rx) = watch::channel(0u64);
        let mut held = HeldResponses::new(Some(rx), || Duration::from_secs(60));
        let mut batch = vec![response(1, Some(5)), response(2, Some(50))];
        held.admit(&mut batch, &budget, |_| {});
        assert!(batch.is_empty());
        tx.send_replace(5);
        drop(tx);
        held.ready().await;
        held.take_ready(&mut batch, 16, &budget, |_| {});
        assert_eq!(
            batch
                .iter()
                .map(|f| (decoded(f).opaque, decoded(f).code))
                .collect::<Vec<_>>(),
            [(1, 0), (2, 10)]
        );
        assert!(held.is_empty());
    }

    #[tokio::test]
    async fn a_shortened_timeout_applies_to_the_responses_held_from_then_on() {
        let (_tx, rx) = watch::channel(0u64);
        let timeout_ms = Arc::new(std::sync::atomic::AtomicU64::new(3_600_000));
        let read = Arc::clone(&timeout_ms);
        let mut held = HeldResponses::new(Some(rx), move || {
            Duration::from_millis(read.load(std::sync::atomic::Ordering::Relaxed))
        });
        let budget = budget();
        let mut batch = vec![response(1, Some(100))];
        held.admit(&mut batch, &budget, |u| panic!("expired {u}"));
        timeout_ms.store(10, std::sync::atomic::Ordering::Relaxed);
        let mut batch = vec![response(2, Some(100))];
        held.admit(&mut batch, &budget, |u| panic!("expired {u}"));
        // Its deadline comes first although it was held last; the first one keeps the hour.
        tokio::time::timeout(Duration::from_secs(30), held.ready())
            .await
            .unwrap_or_else(|_| panic!("the shorter deadline did not wake the writer"));
        held.take_ready(&mut batch, 16, &budget, |_| {});
        assert_eq!(opaques(&batch), [2]);
        assert_eq!(decoded(&batch[0]).code, 10);
        assert!(!held.is_empty(), "the response held for an hour stays");
    }

    #[tokio::test]
    async fn take_ready_respects_the_room_left_in_the_batch() {
        let (tx, rx) = watch::channel(0u64);
        let mut held = HeldResponses::new(Some(rx), || Duration::from_secs(60));
        let budget = budget();
        let mut batch: Vec<_> = (0..5).map(|i| response(i, Some(1))).collect();
        held.admit(&mut batch, &budget, |_| {});
        tx.send_replace(1);
        held.take_ready(&mut batch, 3, &budget, |_| {});
        assert_eq!(opaques(&batch), [0, 1, 2]);
        batch.clear();
        held.take_ready(&mut batch, 3, &budget, |_| {});
        assert_eq!(opaques(&batch), [3, 4]);
        assert!(held.is_empty());
    }
}
