//! # comet-reliability
//!
//! Tests that try hard to make Comet lose or invent messages, run against the real `comet serve`
//! binary as a child process, because the interesting failures (a SIGKILL between write and
//! flush, a torn tail, a shutdown under load) only exist at process level.
//!
//! - [`crash_loop`]: SIGKILL at random moments under load, restart, audit everything acknowledged.
//! - [`churn`]: a clustering group whose push consumers come and go while producers send;
//!   [`churn_consumer`]: one such consumer, run as a child process so it can be SIGKILLed.
//! - [`timer_crash`]: timer messages parked across SIGKILLs, checked by a ledger (none lost, none early).
//! - [`pop_crash`]: POP messages popped and not acked when the broker is SIGKILLed come back.
//! - [`serve`]: the child process; [`wire`]: the raw protocol calls used by the checks;
//!   [`body`]: self-identifying message bodies; [`rng`]: the seeded randomness of kill moments.
//!
//! The `comet-reliability` binary runs long versions (`crash-loop --cycles N`, `churn --seconds
//! N`); `tests/` holds the short CI versions and the torn-log, oneway-flood and graceful-shutdown
//! tests. Figures of long runs are kept in `RELIABILITY.md` at the repository root.

pub mod body;
pub mod churn;
pub mod churn_consumer;
pub mod crash_loop;
pub mod error;
pub mod fault_check;
pub mod fault_load;
pub mod logs;
pub mod pop_crash;
pub mod processes;
pub mod replicated;
pub mod rng;
pub mod serve;
pub mod timer_crash;
pub mod wire;

pub use error::{Error, Result};
