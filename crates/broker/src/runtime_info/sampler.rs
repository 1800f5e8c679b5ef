//! The store's counters sampled once a second: the rates over the last 10, 60 and 600 seconds
//! and the daily totals of the runtime info (see the module docs of [`super`]).

use std::collections::VecDeque;

use parking_lot::Mutex;

/// Samples kept: 601 one-second samples span the longest rate window (600 s).
const SAMPLES: usize = 601;
pub(super) const DAY_MS: i64 = 86_400_000;

/// The store's cumulative counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub at_ms: i64,
    pub puts: u64,
    pub gets_found: u64,
    pub gets_missed: u64,
    pub transferred: u64,
}

#[derive(Debug, Default)]
pub(super) struct Days {
    pub(super) day: i64,
    pub(super) put_today_morning: u64,
    pub(super) put_yesterday_morning: u64,
    pub(super) get_today_morning: u64,
    pub(super) get_yesterday_morning: u64,
}

/// The once-a-second samples behind the rates and the daily totals.
#[derive(Debug, Default)]
pub struct RuntimeSampler {
    samples: Mutex<VecDeque<Counters>>,
    pub(super) days: Mutex<Days>,
}

impl RuntimeSampler {
    /// Adds one sample (and moves the daily totals on when a day began since the last one).
    pub fn sample(&self, now: Counters) {
        let day = now.at_ms.div_euclid(DAY_MS);
        {
            let mut days = self.days.lock();
            if days.day == 0 {
                days.day = day;
            } else if day != days.day {
                days.day = day;
                days.put_yesterday_morning = days.put_today_morning;
                days.get_yesterday_morning = days.get_today_morning;
                days.put_today_morning = now.puts;
                days.get_today_morning = now.transferred;
            }
        }
        let mut samples = self.samples.lock();
        samples.push_back(now);
        while samples.len() > SAMPLES {
            samples.pop_front();
        }
    }

    /// Apache's rate string of one counter: the rates over the last 10, 60 and 600 seconds.
    pub(super) fn rates(&self, value: impl Fn(&Counters) -> u64) -> String {
        let samples = self.samples.lock();
        [10, 60, 600]
            .iter()
            .map(|secs| {
                let (Some(last), Some(first)) = (
                    samples.back(),
                    samples
                        .len()
                        .checked_sub(secs + 1)
                        .and_then(|i| samples.get(i)),
                ) else {
                    return String::new();
                };
                let span_ms = (last.at_ms - first.at_ms).max(1);
                let diff = value(last).saturating_sub(value(first));
                format!("{:?}", diff as f64 * 1000.0 / span_ms as f64)
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64, puts: u64) -> Counters {
        Counters {
            at_ms: 1_000_000_000 + secs * 1000,
            puts,
            ..Counters::default()
        }
    }

    #[test]
    fn rates_cover_10_60_and_600_seconds_once_sampled_that_long() {
        let sampler = RuntimeSampler::default();
        sampler.sample(at(0, 0));
        assert_eq!(sampler.rates(|c| c.puts), "  ");
        for s in 1..=10 {
            sampler.sample(at(s, 100 * s as u64));
        }
        assert_eq!(sampler.rates(|c| c.puts), "100.0  ");
        for s in 11..=700 {
            // 200 per second from second 11 on.
            sampler.sample(at(s, 1000 + 200 * (s as u64 - 10)));
        }
        assert_eq!(sampler.rates(|c| c.puts), "200.0 200.0 200.0");
    }

    #[test]
    fn daily_totals_move_on_at_midnight() {
        let sampler = RuntimeSampler::default();
        let day = |d: i64, puts: u64| Counters {
            at_ms: d * DAY_MS + 5,
            puts,
            transferred: puts / 2,
            ..Counters::default()
        };
        sampler.sample(day(20_000, 10));
        sampler.sample(day(20_001, 30));
        sampler.sample(day(20_001, 35));
        sampler.sample(day(20_002, 70));
        let days = sampler.days.lock();
        assert_eq!(days.put_today_morning, 70);
        assert_eq!(days.put_yesterday_morning, 30);
        assert_eq!(days.get_today_morning, 35);
        assert_eq!(days.get_yesterday_morning, 15);
    }
}
