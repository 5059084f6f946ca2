//! Cron expressions, as crontab(5) reads them: five fields (minute, hour, day of the month,
//! month, day of the week) of numbers, names (`jan`, `mon`), lists, ranges and steps, or one
//! of the `@daily` shorthands; times are read on the wall clock of a time zone.
//!
//! As in cron, a day matches when its day of the month *or* its day of the week does, when
//! both fields are restricted. A wall time a zone skips (a spring-forward gap) runs at the
//! same offset past the gap; a wall time it repeats (falling back) runs once, the first time.

use jiff::ToSpan;
use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// The day-of-month field starts with `*` (`*`, `*/2`): a day must then match both fields.
    any_day: bool,
    /// The day-of-week field starts with `*`.
    any_weekday: bool,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// How far ahead a next time is looked for: past this, the expression never runs (`30 2 31 2 *`).
const SEARCH_YEARS: i16 = 8;

impl Cron {
    pub fn parse(text: &str) -> Result<Cron, String> {
        let text = text.trim();
        let expanded = match text.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *".to_string(),
            "@monthly" => "0 0 1 * *".to_string(),
            "@weekly" => "0 0 * * 0".to_string(),
            "@daily" | "@midnight" => "0 0 * * *".to_string(),
            "@hourly" => "0 * * * *".to_string(),
            other if other.starts_with('@') => return Err(format!("unknown shorthand '{text}'")),
            _ => text.to_string(),
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let [minute, hour, day, month, weekday] = fields[..] else {
            return Err(format!(
                "'{text}' has {} fields; a cron expression has 5: minute hour day-of-month month day-of-week",
                fields.len()
            ));
        };
        let mut weekdays = field(weekday, "day of the week", 0, 7, &WEEKDAYS, 0)?;
        // 7 is Sunday too.
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays & !(1 << 7)) | 1;
        }
        Ok(Cron {
            minutes: field(minute, "minute", 0, 59, &[], 0)?,
            hours: field(hour, "hour", 0, 23, &[], 0)?,
            days: field(day, "day of the month", 1, 31, &[], 0)?,
            months: field(month, "month", 1, 12, &MONTHS, 1)?,
            weekdays,
            any_day: day.starts_with('*'),
            any_weekday: weekday.starts_with('*'),
        })
    }

    fn day_matches(&self, date: Date) -> bool {
        let day = self.days & (1 << date.day()) != 0;
        let weekday = self.weekdays & (1 << date.weekday().to_sunday_zero_offset()) != 0;
        // Cron's rule: a field starting with `*` (`*/2` too) narrows by its own values alone.
        match self.any_day || self.any_weekday {
            true => day && weekday,
            false => day || weekday,
        }
    }

    /// The first time (Unix ms) after `after_ms` that the expression names on `zone`'s wall
    /// clock; `None` if it names none in the next few years.
    pub fn next_after(&self, after_ms: i64, zone: &TimeZone) -> Option<i64> {
        let after = jiff::Timestamp::from_millisecond(after_ms).ok()?;
        let local = after.to_zoned(zone.clone()).datetime();
        let mut at = local
            .with()
            .second(0)
            .subsec_nanosecond(0)
            .build()
            .ok()?
            .checked_add(1.minute())
            .ok()?;
        let last_year = at.year().saturating_add(SEARCH_YEARS);
        while at.year() <= last_year {
            if self.months & (1 << at.month()) == 0 {
                at = at
                    .date()
                    .first_of_month()
                    .checked_add(1.month())
                    .ok()?
                    .to_datetime(jiff::civil::Time::midnight());
                continue;
            }
            if !self.day_matches(at.date()) {
                at = at.date().tomorrow().ok()?.to_datetime(jiff::civil::Time::midnight());
                continue;
            }
            if self.hours & (1 << at.hour()) == 0 {
                at = next_hour(at)?;
                continue;
            }
            // The first named minute from here in this hour, if there is one.
            let from = at.minute() as u32;
            let rest = self.minutes >> from;
            if rest == 0 {
                at = next_hour(at)?;
                continue;
            }
            at = at.with().minute((from + rest.trailing_zeros()) as i8).build().ok()?;
            let when = zone
                .to_ambiguous_zoned(at)
                .compatible()
                .ok()?
                .timestamp()
                .as_millisecond();
            if when > after_ms {
                return Some(when);
            }
            at = at.checked_add(1.minute()).ok()?;
        }
        None
    }
}

fn next_hour(at: DateTime) -> Option<DateTime> {
    let top = at.with().minute(0).build().ok()?;
    top.checked_add(1.hour()).ok()
}

/// One field as a bit set of the values it names. `names` are the values from `first_name`.
fn field(text: &str, what: &str, min: u32, max: u32, names: &[&str], first_name: u32) -> Result<u64, String> {
    let invalid = |why: String| format!("invalid {what} '{text}': {why}");
    let value = |part: &str| -> Result<u32, String> {
        let lower = part.to_ascii_lowercase();
        if let Some(i) = names.iter().position(|n| *n == lower) {
            return Ok(first_name + i as u32);
        }
        let n: u32 = part.parse().map_err(|_| invalid(format!("'{part}' is not a number")))?;
        if n < min || n > max {
            return Err(invalid(format!("{n} is not between {min} and {max}")));
        }
        Ok(n)
    };
    let mut bits = 0u64;
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step
                    .parse()
                    .map_err(|_| invalid(format!("step '{step}' is not a number")))?;
                if step == 0 {
                    return Err(invalid("a step of 0".into()));
                }
                (range, step)
            }
            None => (item, 1),
        };
        let (low, high) = match range {
            "*" => (min, max),
            _ => match range.split_once('-') {
                Some((low, high)) => (value(low)?, value(high)?),
                // `5/15`: from 5 to the end, every 15.
                None if step > 1 => (value(range)?, max),
                None => {
                    let n = value(range)?;
                    (n, n)
                }
            },
        };
        if low > high {
            return Err(invalid(format!("the range {low}-{high} runs backwards")));
        }
        for n in (low..=high).step_by(step as usize) {
            bits |= 1 << n;
        }
    }
    Ok(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> i64 {
        crate::clock::parse_iso(text).unwrap()
    }

    fn next(expr: &str, zone: &str, after: &str) -> String {
        let zone = TimeZone::get(zone).unwrap();
        crate::clock::iso(Cron::parse(expr).unwrap().next_after(at(after), &zone).unwrap())
    }

    #[test]
    fn reads_the_five_fields_names_steps_and_shorthands() {
        assert_eq!(
            next("0 9 * * *", "UTC", "2026-12-01T08:59:59Z"),
            "2026-12-01T09:00:00.000Z"
        );
        assert_eq!(
            next("0 9 * * *", "UTC", "2026-12-01T09:00:00Z"),
            "2026-12-02T09:00:00.000Z"
        );
        assert_eq!(
            next("*/15 * * * *", "UTC", "2026-12-01T10:07:00Z"),
            "2026-12-01T10:15:00.000Z"
        );
        assert_eq!(
            next("5/20 * * * *", "UTC", "2026-12-01T10:46:00Z"),
            "2026-12-01T11:05:00.000Z"
        );
        assert_eq!(
            next("30 8 * * mon-fri", "UTC", "2026-12-04T09:00:00Z"),
            "2026-12-07T08:30:00.000Z"
        );
        assert_eq!(
            next("0 0 1 jan *", "UTC", "2026-12-01T00:00:00Z"),
            "2027-01-01T00:00:00.000Z"
        );
        assert_eq!(
            next("@hourly", "UTC", "2026-12-01T10:00:00Z"),
            "2026-12-01T11:00:00.000Z"
        );
        assert_eq!(
            next("0 12 * * 7", "UTC", "2026-12-01T00:00:00Z"),
            "2026-12-06T12:00:00.000Z"
        );
        assert_eq!(
            next("0 0 29 2 *", "UTC", "2026-03-01T00:00:00Z"),
            "2028-02-29T00:00:00.000Z"
        );
        assert_eq!(
            next("0,30 23 31 * *", "UTC", "2026-11-01T00:00:00Z"),
            "2026-12-31T23:00:00.000Z"
        );
    }

    #[test]
    fn a_restricted_day_and_weekday_match_either() {
        // The 15th, or any Monday: Monday 2026-12-07 comes first.
        assert_eq!(
            next("0 0 15 * mon", "UTC", "2026-12-02T00:00:00Z"),
            "2026-12-07T00:00:00.000Z"
        );
        assert_eq!(
            next("0 0 15 * mon", "UTC", "2026-12-14T00:00:00Z"),
            "2026-12-15T00:00:00.000Z"
        );
        // Every other day of the month is still only those days.
        assert_eq!(
            next("0 0 */2 * *", "UTC", "2026-12-01T00:00:00Z"),
            "2026-12-03T00:00:00.000Z"
        );
    }

    #[test]
    fn times_are_on_the_zones_wall_clock_across_daylight_saving() {
        // Paris is UTC+1 in winter, UTC+2 in summer.
        assert_eq!(
            next("0 9 * * *", "Europe/Paris", "2026-12-01T00:00:00Z"),
            "2026-12-01T08:00:00.000Z"
        );
        assert_eq!(
            next("0 9 * * *", "Europe/Paris", "2026-07-01T00:00:00Z"),
            "2026-07-01T07:00:00.000Z"
        );
        // 2026-03-29: 02:00 jumps to 03:00; 02:30 runs once, at 03:30 local (01:30 UTC).
        assert_eq!(
            next("30 2 * * *", "Europe/Paris", "2026-03-28T12:00:00Z"),
            "2026-03-29T01:30:00.000Z"
        );
        assert_eq!(
            next("30 2 * * *", "Europe/Paris", "2026-03-29T01:30:00Z"),
            "2026-03-30T00:30:00.000Z"
        );
        // 2026-10-25: 03:00 falls back to 02:00; 02:30 runs the first time only.
        assert_eq!(
            next("30 2 * * *", "Europe/Paris", "2026-10-24T12:00:00Z"),
            "2026-10-25T00:30:00.000Z"
        );
        assert_eq!(
            next("30 2 * * *", "Europe/Paris", "2026-10-25T00:30:00Z"),
            "2026-10-26T01:30:00.000Z"
        );
    }

    #[test]
    fn refuses_what_is_not_cron() {
        for bad in [
            "",
            "* * * *",
            "* * * * * *",
            "60 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "* * * * 8",
        ] {
            assert!(Cron::parse(bad).is_err(), "{bad}");
        }
        for bad in ["*/0 * * * *", "5-1 * * * *", "x * * * *", "* * * foo *", "@often"] {
            assert!(Cron::parse(bad).is_err(), "{bad}");
        }
        assert!(
            Cron::parse("0 0 31 2 *")
                .unwrap()
                .next_after(0, &TimeZone::UTC)
                .is_none()
        );
    }
}
