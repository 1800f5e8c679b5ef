//! Wall-clock time as RocketMQ carries it (milliseconds since the Unix epoch) and the calendar
//! arithmetic the wire and store formats need (message-id month bounds, index file names, the
//! CLI's dates), without a time-zone database.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds in a day.
pub const MILLIS_PER_DAY: i64 = 86_400_000;
/// Seconds in a day.
pub const SECS_PER_DAY: i64 = 86_400;

/// Milliseconds since the Unix epoch now (0 if the clock is before 1970).
pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Proleptic Gregorian (year, month 1–12, day 1–31) of a day count since 1970-01-01 (the inverse
/// of [`days_from_civil`]).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// UTC (year, month 1–12, day, hour, minute, second) of `unix_secs`.
pub fn utc_civil_time(unix_secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    let (year, month, day) = civil_from_days(unix_secs.div_euclid(SECS_PER_DAY));
    let rem = unix_secs.rem_euclid(SECS_PER_DAY);
    (year, month, day, rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_round_trip() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        for days in [-800_000, -1, 0, 59, 60, 11_016, 20_000, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn utc_civil_time_known_dates() {
        assert_eq!(utc_civil_time(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(utc_civil_time(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(utc_civil_time(-1), (1969, 12, 31, 23, 59, 59));
    }

    #[test]
    fn now_is_after_2020() {
        assert!(now_millis() > 1_577_836_800_000);
    }
}
