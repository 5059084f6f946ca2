//! `[[schedules]]`: work the agent does on its own (docs/schedules.md), checked as the
//! account API checks it, plus what only a manifest knows: its commands.

use toml::Spanned;

use super::{Checker, ManifestError};
use crate::domain::CommandDef;
use crate::domain::schedule::{Action, ScheduleDef, ScheduleSpec};

pub(super) fn check(
    check: &Checker<'_>,
    raw: Vec<Spanned<ScheduleSpec>>,
    commands: &[CommandDef],
    now_ms: i64,
) -> Result<Vec<ScheduleDef>, ManifestError> {
    let mut schedules: Vec<ScheduleDef> = Vec::with_capacity(raw.len());
    for (i, spanned) in raw.into_iter().enumerate() {
        let span = spanned.span();
        let spec = spanned.into_inner();
        let at = |field: &str| format!("schedules[{i}].{field}");
        if spec.after_seconds.is_some() {
            return Err(check.err(
                Some(&span),
                at("after_seconds"),
                "a manifest names a time with 'at' (a delay would start again at each apply)",
            ));
        }
        let def = spec
            .check_with(now_ms, true)
            .map_err(|e| check.err(Some(&span), at(e.field), e.message))?;
        if let Action::Command { command, .. } = &def.action
            && !commands.iter().any(|c| &c.name == command)
        {
            return Err(check.err(
                Some(&span),
                at("command"),
                format!("the manifest has no command '{command}'"),
            ));
        }
        if schedules.iter().any(|s| s.name == def.name) {
            return Err(check.err(
                Some(&span),
                at("name"),
                format!("another schedule is named '{}'", def.name),
            ));
        }
        schedules.push(def);
    }
    Ok(schedules)
}
