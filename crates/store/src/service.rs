//! The machinery every background thread of the store shares: a wake-up signal ([`Waker`]) and
//! a stop flag with the thread's handle (`ServiceState`).
//!
//! The store runs several such threads (CommitLog flush, ConsumeQueue flush, dispatch, page
//! release, zero-ahead). Each writes only its loop; how it sleeps, is woken, is stopped and is
//! joined is the same for all of them and lives here, below every service, so that the
//! structures a service drives (the CommitLog, say, which wakes the page release thread) can
//! hold a `Waker` without depending on the service.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::StoreError;

/// A wake-up signal with memory: a `wake` before the `wait` is not lost.
///
/// Appends call `wake` once per message, so it must cost next to nothing when the service is
/// already awake or already woken: two atomics decide that, and the mutex and the futex call are
/// only taken when the service thread actually sleeps. (`pending` and `sleeping` are a
/// store-then-load pair on each side, hence `SeqCst`: either the waker sees the sleeper, or the
/// sleeper sees the wake-up before it sleeps.)
#[derive(Debug, Default)]
pub struct Waker {
    pending: AtomicBool,
    sleeping: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Waker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Wakes the waiter (or makes its next wait return immediately).
    pub fn wake(&self) {
        if self.pending.swap(true, Ordering::SeqCst) {
            return;
        }
        if self.sleeping.load(Ordering::SeqCst) {
            // Taking the lock orders this notify after the sleeper's own check: it holds the
            // lock from before it announced itself until the condvar wait releases it.
            let _guard = self.lock.lock();
            self.cv.notify_all();
        }
    }

    /// Looks for a wake-up for up to `window` without sleeping, yielding the CPU between looks
    /// (a thread that wants the core gets it); consumes the wake-up. Returns whether it came.
    /// A poll costs the waker nothing more than a flag: it only takes the condvar's lock for a
    /// sleeper.
    pub fn poll(&self, window: Duration) -> bool {
        let start = Instant::now();
        loop {
            if self.pending.load(Ordering::Relaxed) && self.pending.swap(false, Ordering::SeqCst) {
                return true;
            }
            if start.elapsed() >= window {
                return false;
            }
            std::thread::yield_now();
        }
    }

    /// Waits until woken or `timeout` passes; consumes the wake-up. Returns whether it was woken.
    ///
    /// A notify without a pending wake-up does not end the wait: a `wake` of an earlier round
    /// can reach the condvar after its sleeper already returned and slept again, and the
    /// condvar itself may wake spuriously.
    pub fn wait(&self, timeout: Duration) -> bool {
        if self.pending.swap(false, Ordering::SeqCst) {
            return true;
        }
        let deadline = Instant::now() + timeout;
        let mut guard = self.lock.lock();
        self.sleeping.store(true, Ordering::SeqCst);
        while !self.pending.load(Ordering::SeqCst) {
            if self.cv.wait_until(&mut guard, deadline).timed_out() {
                break;
            }
        }
        self.sleeping.store(false, Ordering::SeqCst);
        drop(guard);
        self.pending.swap(false, Ordering::SeqCst)
    }
}

/// A stoppable background thread of the store: its stop flag and its handle. Each service owns
/// one and writes only its loop (`while !state.is_stopped() { waker.wait(..); work }`); starting,
/// stopping and joining are the same for all of them.
#[derive(Debug, Default)]
pub(crate) struct ServiceState {
    stopped: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl ServiceState {
    /// Spawns the service's thread under `name` and keeps its handle for [`ServiceState::stop`].
    pub(crate) fn spawn(
        &self,
        name: &str,
        body: impl FnOnce() + Send + 'static,
    ) -> Result<(), StoreError> {
        let handle = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(body)
            .map_err(|e| StoreError::io(format!("<thread {name}>"), e))?;
        let previous = self.thread.lock().replace(handle);
        assert!(previous.is_none(), "service thread {name} started twice");
        Ok(())
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Sets the stop flag, wakes the thread through the `waker` its loop waits on and waits for
    /// it to finish (a panic of the thread is logged, not propagated: shutdown goes on).
    pub(crate) fn stop(&self, waker: &Waker) {
        self.stopped.store(true, Ordering::Release);
        waker.wake();
        if let Some(handle) = self.thread.lock().take() {
            let name = handle.thread().name().unwrap_or("store service").to_owned();
            if handle.join().is_err() {
                tracing::error!(thread = %name, "store service thread panicked");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn waker_remembers_a_wake_before_wait() {
        let w = Waker::new();
        w.wake();
        assert!(w.wait(Duration::from_secs(5)));
        assert!(!w.wait(Duration::from_millis(1)));
    }

    #[test]
    fn waker_wakes_a_blocked_thread() {
        let w = Arc::new(Waker::new());
        let w2 = Arc::clone(&w);
        let t = std::thread::spawn(move || w2.wait(Duration::from_secs(30)));
        // Whether the wake lands before or during the wait, the waiter must report it.
        w.wake();
        assert_eq!(t.join().ok(), Some(true));
    }

    /// A poll reports a wake-up made before it or during it, consumes it, and gives up after
    /// its window when none comes.
    #[test]
    fn waker_poll_catches_wake_ups_and_gives_up_after_its_window() {
        const HANG_GUARD: Duration = Duration::from_secs(60);
        let w = Arc::new(Waker::new());
        w.wake();
        assert!(w.poll(Duration::ZERO), "a wake-up made before the poll");
        assert!(!w.poll(Duration::ZERO), "consumed");
        let window = Duration::from_millis(5);
        let started = Instant::now();
        assert!(!w.poll(window), "nobody woke it");
        assert!(started.elapsed() >= window, "gave up before its window");
        let w2 = Arc::clone(&w);
        let t = std::thread::spawn(move || w2.poll(HANG_GUARD));
        w.wake();
        assert_eq!(t.join().ok(), Some(true), "a wake-up during the poll");
    }

    /// Ping-pong between two threads: a wake-up lost between the atomics and the condvar would
    /// leave one side waiting out its (long) timeout and report `false`.
    #[test]
    fn waker_loses_no_wake_up_in_a_ping_pong() {
        const ROUNDS: usize = 20_000;
        const HANG_GUARD: Duration = Duration::from_secs(60);
        let ping = Arc::new(Waker::new());
        let pong = Arc::new(Waker::new());
        let (ping2, pong2) = (Arc::clone(&ping), Arc::clone(&pong));
        let t = std::thread::spawn(move || {
            (0..ROUNDS).all(|_| {
                let woken = ping2.wait(HANG_GUARD);
                pong2.wake();
                woken
            })
        });
        let mine = (0..ROUNDS).all(|_| {
            ping.wake();
            pong.wait(HANG_GUARD)
        });
        assert!(mine, "a pong was lost");
        assert_eq!(t.join().ok(), Some(true), "a ping was lost");
    }
}
