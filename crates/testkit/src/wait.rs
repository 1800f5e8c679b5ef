//! Waiting for effects that arrive later, the one way every test does it: poll a condition every
//! [`POLL`] until it holds, under a deadline that is a hang guard (only a failing test ever waits
//! that long). Tests never sleep to synchronize.

use std::future::Future;
use std::time::{Duration, Instant};

/// Longest wait for an asynchronous effect before a test fails: a hang guard, generous for a
/// loaded 2-core CI box (the orderly consumer's hand-over alone waits out a 20 s unlock delay).
pub const WAIT_DEADLINE: Duration = Duration::from_secs(60);
/// Poll period of every wait here.
pub const POLL: Duration = Duration::from_millis(20);

/// Polls `condition` until it holds (`true`) or [`WAIT_DEADLINE`] passes (`false`).
pub async fn wait_until<F, Fut>(condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    wait_until_within(WAIT_DEADLINE, condition).await
}

/// Polls `condition` until it holds (`true`) or `deadline` passes (`false`).
pub async fn wait_until_within<F, Fut>(deadline: Duration, condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    wait_until_every(POLL, deadline, condition).await
}

/// Polls `condition` every `period` until it holds (`true`) or `deadline` passes (`false`): for
/// a condition that is costly to check (it runs a process, say).
pub async fn wait_until_every<F, Fut>(
    period: Duration,
    deadline: Duration,
    mut condition: F,
) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + deadline;
    loop {
        if condition().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(period).await;
    }
}

/// Polls `condition` until it holds; panics naming `what` after [`WAIT_DEADLINE`]. A condition
/// that is not a future is `|| std::future::ready(..)`.
pub async fn eventually<F, Fut>(what: &str, condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    assert!(
        wait_until(condition).await,
        "timed out waiting for {what} ({WAIT_DEADLINE:?})"
    );
}

/// Polls `probe` until it yields a value; panics naming `what` after [`WAIT_DEADLINE`].
pub async fn wait_for<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT_DEADLINE;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what} ({WAIT_DEADLINE:?})"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// [`eventually`] for a plain thread (tests that drive child processes without a runtime):
/// polls `condition` until it holds; panics naming `what` after `deadline`.
pub fn eventually_blocking(what: &str, deadline: Duration, mut condition: impl FnMut() -> bool) {
    let until = Instant::now() + deadline;
    while !condition() {
        assert!(
            Instant::now() < until,
            "timed out waiting for {what} ({deadline:?})"
        );
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_condition_that_turns_true_is_seen() {
        let mut calls = 0;
        assert!(
            wait_until(|| {
                calls += 1;
                std::future::ready(calls >= 3)
            })
            .await
        );
        assert_eq!(calls, 3);
        let value = wait_for("the third call", || {
            calls += 1;
            std::future::ready((calls >= 5).then_some(calls))
        })
        .await;
        assert_eq!(value, 5);
    }

    #[tokio::test]
    async fn a_condition_that_never_holds_ends_at_the_deadline() {
        assert!(!wait_until_within(Duration::from_millis(100), || std::future::ready(false)).await);
    }
}
