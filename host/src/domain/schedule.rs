//! A schedule: work an agent does on its own, when its owner said. What it is (a command run
//! or a prompt to the agent's chat), when (once, every interval, or on a cron expression in a
//! time zone), where its answer goes, and what happens to times missed while no host ran.
//! The same fields come from a manifest's `[[schedules]]`, the account API and the CLI, and
//! are checked here, once.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::cron::Cron;

/// When it runs. Times are Unix milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Timing {
    Once {
        at: i64,
    },
    /// Every `seconds`, counted from `from` (when it was made).
    Every {
        seconds: u64,
        from: i64,
    },
    Cron {
        expression: String,
        timezone: String,
    },
}

impl Timing {
    /// Its first time after `after_ms`, if it has one.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        match self {
            Timing::Once { at } => (*at > after_ms).then_some(*at),
            Timing::Every { seconds, from } => {
                let every = (*seconds as i64).saturating_mul(1000);
                if *from > after_ms {
                    return Some(*from);
                }
                let passed = (after_ms - from) / every + 1;
                Some(from.saturating_add(passed.saturating_mul(every)))
            }
            Timing::Cron { expression, timezone } => {
                let cron = Cron::parse(expression).ok()?;
                let zone = jiff::tz::TimeZone::get(timezone).ok()?;
                cron.next_after(after_ms, &zone)
            }
        }
    }

    pub fn is_once(&self) -> bool {
        matches!(self, Timing::Once { .. })
    }
}

/// What it does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Runs one of the agent's commands with these parameters.
    Command {
        command: String,
        parameters: Map<String, Value>,
    },
    /// Asks the agent's chat, which may call its commands as tools.
    Prompt { prompt: String },
}

/// Where the answer goes; the run log keeps it in every case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "to", rename_all = "snake_case", deny_unknown_fields)]
pub enum Delivery {
    Log,
    /// A message from the agent's bot to this chat.
    Telegram {
        chat_id: i64,
    },
    /// A post on the agent's connected social account.
    Social,
    /// A `schedule.ran` event to the account's webhook endpoints.
    Webhook,
}

impl Delivery {
    pub fn as_str(&self) -> &'static str {
        match self {
            Delivery::Log => "log",
            Delivery::Telegram { .. } => "telegram",
            Delivery::Social => "social",
            Delivery::Webhook => "webhook",
        }
    }
}

/// What a time missed while no host ran (the host was down, or the last run still ran) becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Missed {
    /// Run once, late, then keep to the schedule.
    #[default]
    CatchUp,
    /// Record it as skipped and wait for the next time.
    Skip,
}

/// A checked schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleDef {
    pub name: String,
    pub timing: Timing,
    pub action: Action,
    pub delivery: Delivery,
    pub missed: Missed,
    pub enabled: bool,
}

/// A schedule as an owner writes it, in a manifest (TOML) or a request (JSON).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    pub name: String,
    /// One of these four says when.
    pub cron: Option<String>,
    /// The cron expression's time zone (IANA, e.g. `Europe/Paris`); UTC when absent.
    pub timezone: Option<String>,
    pub every_seconds: Option<u64>,
    /// RFC 3339.
    pub at: Option<String>,
    pub after_seconds: Option<u64>,
    /// One of these two says what.
    pub command: Option<String>,
    pub parameters: Option<Map<String, Value>>,
    pub prompt: Option<String>,
    pub deliver: Option<Delivery>,
    pub missed: Option<Missed>,
    pub enabled: Option<bool>,
}

/// Shortest interval of an `every_seconds` schedule (a cron expression's is a minute too).
pub const MIN_INTERVAL_SECS: u64 = 60;
/// Longest interval, delay, and how far ahead `at` may be.
pub const MAX_AHEAD_SECS: u64 = 366 * 24 * 3600;
pub const MAX_PROMPT_CHARS: usize = 4_000;
pub const MAX_NAME_CHARS: usize = 64;

/// A field at fault and what is wrong with it.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecError {
    pub field: &'static str,
    pub message: String,
}

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Invalid field '{}': {}", self.field, self.message)
    }
}

fn wrong(field: &'static str, message: impl Into<String>) -> SpecError {
    SpecError {
        field,
        message: message.into(),
    }
}

impl ScheduleSpec {
    /// The schedule it describes, made at `now_ms`; `after_seconds` counts from then.
    pub fn check(self, now_ms: i64) -> Result<ScheduleDef, SpecError> {
        self.check_with(now_ms, false)
    }

    /// `check`, where an `at` that has passed may be kept (`past_at`): a manifest applied again
    /// after its one-off ran still says it.
    pub fn check_with(self, now_ms: i64, past_at: bool) -> Result<ScheduleDef, SpecError> {
        let name = self.name.trim().to_string();
        // `sch_...` is how ids look, and a schedule is found by its id or its name.
        let good_name = !name.is_empty()
            && !name.starts_with("sch_")
            && name.chars().count() <= MAX_NAME_CHARS
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !good_name {
            return Err(wrong(
                "name",
                format!("1 to {MAX_NAME_CHARS} characters of a-z, 0-9, '-' and '_', not starting with 'sch_'"),
            ));
        }
        let timing = timing(&self, now_ms, past_at)?;
        if self.timezone.is_some() && self.cron.is_none() {
            return Err(wrong("timezone", "a time zone goes with 'cron'"));
        }
        let action = match (self.command, self.prompt) {
            (Some(command), None) => Action::Command {
                command: command.trim().trim_start_matches('/').to_string(),
                parameters: self.parameters.unwrap_or_default(),
            },
            (None, Some(prompt)) => {
                if self.parameters.is_some() {
                    return Err(wrong("parameters", "parameters go with 'command'"));
                }
                let prompt = prompt.trim().to_string();
                if prompt.is_empty() || prompt.chars().count() > MAX_PROMPT_CHARS {
                    return Err(wrong("prompt", format!("1 to {MAX_PROMPT_CHARS} characters")));
                }
                Action::Prompt { prompt }
            }
            _ => {
                return Err(wrong(
                    "command",
                    "give 'command' (a command to run) or 'prompt', one of them",
                ));
            }
        };
        if let Action::Command { command, .. } = &action
            && command.is_empty()
        {
            return Err(wrong("command", "name one of the agent's commands"));
        }
        Ok(ScheduleDef {
            name,
            timing,
            action,
            delivery: self.deliver.unwrap_or(Delivery::Log),
            missed: self.missed.unwrap_or_default(),
            enabled: self.enabled.unwrap_or(true),
        })
    }
}

fn timing(spec: &ScheduleSpec, now_ms: i64, past_at: bool) -> Result<Timing, SpecError> {
    let given = [
        spec.cron.is_some(),
        spec.every_seconds.is_some(),
        spec.at.is_some(),
        spec.after_seconds.is_some(),
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(wrong(
            "cron",
            "say when with one of 'cron', 'every_seconds', 'at' or 'after_seconds'",
        ));
    }
    let ahead_ms = (MAX_AHEAD_SECS * 1000) as i64;
    if let Some(expression) = &spec.cron {
        let cron = Cron::parse(expression).map_err(|why| wrong("cron", why))?;
        let timezone = spec.timezone.as_deref().map(str::trim).unwrap_or("UTC").to_string();
        let zone = jiff::tz::TimeZone::get(&timezone).map_err(|_| {
            wrong(
                "timezone",
                format!("'{timezone}' is not a time zone (use an IANA name such as Europe/Paris)"),
            )
        })?;
        if cron.next_after(now_ms, &zone).is_none() {
            return Err(wrong("cron", format!("'{expression}' names no time that comes")));
        }
        return Ok(Timing::Cron {
            expression: expression.trim().to_string(),
            timezone,
        });
    }
    if let Some(seconds) = spec.every_seconds {
        if !(MIN_INTERVAL_SECS..=MAX_AHEAD_SECS).contains(&seconds) {
            return Err(wrong(
                "every_seconds",
                format!("between {MIN_INTERVAL_SECS} and {MAX_AHEAD_SECS}"),
            ));
        }
        return Ok(Timing::Every { seconds, from: now_ms });
    }
    if let Some(seconds) = spec.after_seconds {
        if !(1..=MAX_AHEAD_SECS).contains(&seconds) {
            return Err(wrong("after_seconds", format!("between 1 and {MAX_AHEAD_SECS}")));
        }
        return Ok(Timing::Once {
            at: now_ms + seconds as i64 * 1000,
        });
    }
    let text = spec.at.as_deref().unwrap_or_default();
    let at = crate::clock::parse_iso(text)
        .ok_or_else(|| wrong("at", format!("'{text}' is not an RFC 3339 time (2026-12-01T09:00:00Z)")))?;
    if (at <= now_ms && !past_at) || at > now_ms + ahead_ms {
        return Err(wrong("at", "a time to come, within a year"));
    }
    Ok(Timing::Once { at })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_796_112_000_000; // 2026-12-01T08:00:00Z

    fn spec(name: &str) -> ScheduleSpec {
        ScheduleSpec {
            name: name.into(),
            prompt: Some("Write the day's tip.".into()),
            ..Default::default()
        }
    }

    #[test]
    fn every_counts_from_its_start_and_once_runs_once() {
        let every = Timing::Every {
            seconds: 3600,
            from: NOW,
        };
        assert_eq!(every.next_after(NOW - 1), Some(NOW));
        assert_eq!(every.next_after(NOW), Some(NOW + 3_600_000));
        assert_eq!(every.next_after(NOW + 3 * 3_600_000 + 5), Some(NOW + 4 * 3_600_000));
        let once = Timing::Once { at: NOW };
        assert_eq!(once.next_after(NOW - 1), Some(NOW));
        assert_eq!(once.next_after(NOW), None);
    }

    #[test]
    fn checks_when_what_and_the_name() {
        let def = ScheduleSpec {
            cron: Some("0 9 * * *".into()),
            timezone: Some("Europe/Paris".into()),
            ..spec("daily-tip")
        }
        .check(NOW)
        .unwrap();
        assert_eq!(def.delivery, Delivery::Log);
        assert_eq!(def.missed, Missed::CatchUp);
        assert_eq!(def.timing.next_after(NOW), Some(NOW + 3_600_000 * 24));
        let later = ScheduleSpec {
            after_seconds: Some(90),
            ..spec("soon")
        }
        .check(NOW)
        .unwrap();
        assert_eq!(later.timing, Timing::Once { at: NOW + 90_000 });

        let field = |spec: ScheduleSpec| spec.check(NOW).unwrap_err().field;
        assert_eq!(field(spec("tip")), "cron");
        assert_eq!(
            field(ScheduleSpec {
                every_seconds: Some(59),
                ..spec("tip")
            }),
            "every_seconds"
        );
        assert_eq!(
            field(ScheduleSpec {
                cron: Some("0 9 * * *".into()),
                timezone: Some("Mars/Olympus".into()),
                ..spec("tip")
            }),
            "timezone"
        );
        assert_eq!(
            field(ScheduleSpec {
                at: Some("2020-01-01T00:00:00Z".into()),
                ..spec("tip")
            }),
            "at"
        );
        assert_eq!(
            field(ScheduleSpec {
                every_seconds: Some(60),
                ..spec("Tip!")
            }),
            "name"
        );
        assert_eq!(
            field(ScheduleSpec {
                every_seconds: Some(60),
                command: Some("hello".into()),
                ..spec("tip")
            }),
            "command"
        );
        assert_eq!(
            field(ScheduleSpec {
                every_seconds: Some(60),
                timezone: Some("UTC".into()),
                ..spec("tip")
            }),
            "timezone"
        );
    }

    #[test]
    fn deliveries_read_as_written() {
        let telegram: Delivery =
            serde_json::from_value(serde_json::json!({ "to": "telegram", "chat_id": 42 })).unwrap();
        assert_eq!(telegram, Delivery::Telegram { chat_id: 42 });
        let social: Delivery = toml::from_str::<toml::Value>("to = \"social\"")
            .unwrap()
            .try_into()
            .unwrap();
        assert_eq!(social, Delivery::Social);
        assert!(serde_json::from_value::<Delivery>(serde_json::json!({ "to": "fax" })).is_err());
    }
}
