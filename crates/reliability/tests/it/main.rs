//! The reliability tests' short CI versions, one binary: each drives real `comet serve` child
//! processes (the `comet` binary beside this one, `comet_testkit::process::comet_bin`) in
//! temporary directories on free ports, so the tests run side by side.

mod churn;
mod crash_loop;
mod graceful_shutdown;
mod oneway_flood;
mod pop_crash;
mod replicated_crash_loop;
mod timer_crash;
mod torn_logs;
