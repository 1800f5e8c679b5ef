//! Wake-ups of held pops and notifications. A held request waits on the topics it reads (the
//! topic and the group's POP retry topic); an arriving message wakes only the requests waiting
//! on a shard its topic hashes to, so a busy topic does not re-run every held pop of the broker.
//! Arrivals are dropped at once while nothing is held: the store calls this for every message
//! it dispatches.

use std::future::Future;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::sync::futures::Notified;

/// Most pops held at once; more are answered POLLING_FULL.
pub const MAX_HELD_POPS: usize = 100_000;
/// Longest a held pop sleeps before it looks again even without a wake-up.
pub const HELD_RECHECK: Duration = Duration::from_millis(1000);

/// Shards of the wake-ups; topics hashing to one shard wake each other's held requests.
pub const ARRIVAL_SHARDS: usize = 64;

/// The wake-ups of one broker.
#[derive(Debug)]
pub struct Arrivals {
    shards: [Notify; ARRIVAL_SHARDS],
    hasher: std::collections::hash_map::RandomState,
    held: AtomicUsize,
}

impl Default for Arrivals {
    fn default() -> Self {
        Arrivals {
            shards: std::array::from_fn(|_| Notify::new()),
            hasher: std::collections::hash_map::RandomState::new(),
            held: AtomicUsize::new(0),
        }
    }
}

impl Arrivals {
    fn shard(&self, topic: &str) -> &Notify {
        let hash = self.hasher.hash_one(topic);
        &self.shards[(hash % ARRIVAL_SHARDS as u64) as usize]
    }

    /// A message arrived in `topic`: wakes the requests held on it.
    pub fn notify(&self, topic: &str) {
        if self.held.load(Ordering::Acquire) > 0 {
            self.shard(topic).notify_waiters();
        }
    }

    /// Requests held right now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Starts watching `topics`: an arrival from now on in any of them completes the
    /// [`ArrivalWatch::wait`]. Take the watch *before* looking for messages, so one arriving
    /// between the look and the wait is not missed; the request counts as held from here until
    /// the watch is dropped.
    pub fn watch(&self, topics: &[&str]) -> ArrivalWatch<'_> {
        self.held.fetch_add(1, Ordering::AcqRel);
        let mut notified: Vec<Pin<Box<Notified<'_>>>> = Vec::with_capacity(topics.len());
        let mut seen: Vec<*const Notify> = Vec::with_capacity(topics.len());
        for topic in topics {
            let shard = self.shard(topic);
            if seen.contains(&(shard as *const Notify)) {
                continue;
            }
            seen.push(shard);
            let mut n = Box::pin(shard.notified());
            n.as_mut().enable();
            notified.push(n);
        }
        ArrivalWatch {
            arrivals: self,
            notified,
        }
    }
}

/// Arrivals watched since [`Arrivals::watch`].
pub struct ArrivalWatch<'a> {
    arrivals: &'a Arrivals,
    notified: Vec<Pin<Box<Notified<'a>>>>,
}

impl ArrivalWatch<'_> {
    /// Holds the request until an arrival in a watched topic, at most `timeout`. `true` when
    /// woken by an arrival.
    pub async fn wait(mut self, timeout: Duration) -> bool {
        let any = std::future::poll_fn(|cx| {
            for n in &mut self.notified {
                if n.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(());
                }
            }
            Poll::Pending
        });
        tokio::time::timeout(timeout, any).await.is_ok()
    }
}

impl Drop for ArrivalWatch<'_> {
    fn drop(&mut self) {
        self.arrivals.held.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A topic whose shard differs from `topic`'s.
    fn apart(a: &Arrivals, topic: &str) -> String {
        (0..1000)
            .map(|i| format!("Other{i}"))
            .find(|t| !std::ptr::eq(a.shard(t), a.shard(topic)))
            .expect("64 shards separate some of 1000 names")
    }

    #[tokio::test]
    async fn an_arrival_wakes_only_requests_watching_its_topic() {
        let arrivals = Arrivals::default();
        let (mine, retry) = ("TopicA", "%RETRY%g_TopicA");
        let other = apart(&arrivals, mine);
        let other = if std::ptr::eq(arrivals.shard(&other), arrivals.shard(retry)) {
            apart(&arrivals, retry)
        } else {
            other
        };
        assert!(!std::ptr::eq(arrivals.shard(&other), arrivals.shard(mine)));

        // An arrival elsewhere does not end the wait: the timeout does. (Nothing can wake the
        // watch later, so a short timeout decides nothing by timing.)
        let watch = arrivals.watch(&[mine, retry]);
        assert_eq!(arrivals.held(), 1);
        arrivals.notify(&other);
        assert!(!watch.wait(Duration::from_millis(20)).await);
        assert_eq!(arrivals.held(), 0);

        // An arrival in the topic or its retry topic, after the watch was taken and before the
        // wait began, ends the wait.
        for topic in [mine, retry] {
            let watch = arrivals.watch(&[mine, retry]);
            arrivals.notify(topic);
            assert!(watch.wait(Duration::from_secs(5)).await, "{topic}");
        }
        assert_eq!(arrivals.held(), 0);
    }

    #[tokio::test]
    async fn nothing_held_drops_arrivals_and_a_wait_then_times_out() {
        let arrivals = Arrivals::default();
        arrivals.notify("T");
        let watch = arrivals.watch(&["T"]);
        assert!(!watch.wait(Duration::from_millis(20)).await);
    }
}
