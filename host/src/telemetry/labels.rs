//! The names that may stand in metric labels: agents and commands by name for the first
//! `metrics_max_agents` / `metrics_max_commands` seen, the rest folded into `other`, so a
//! deployment's series stay bounded whatever its agents are called.

use std::collections::HashMap;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

pub(super) const OTHER: &str = "other";

/// Route templates are a fixed set of the router's; this is only a guard.
const MAX_ROUTES: usize = 512;

#[derive(Default)]
pub(super) struct LabelNames(RwLock<Names>);

#[derive(Default)]
struct Names {
    max_agents: usize,
    max_commands: usize,
    agents: HashMap<String, &'static str>,
    /// The operator named the agents to label: no other is admitted.
    named_only: bool,
    /// By agent, then command: looked up without building a key.
    commands: HashMap<String, HashMap<String, &'static str>>,
    commands_admitted: usize,
    routes: HashMap<String, &'static str>,
}

/// A name as a label value: the exposition writes values as they are, so a quote, a
/// backslash or a line break (which names here cannot hold today) would break it. Each is
/// leaked once: a label is a `&'static str` to copy, and the caps bound them.
fn label(name: &str) -> &'static str {
    let text: String = name
        .chars()
        .map(|c| if matches!(c, '"' | '\\' | '\n' | '\r') { '_' } else { c })
        .collect();
    Box::leak(text.into_boxed_str())
}

/// `name`'s label in `map`, admitted while the map holds fewer than `cap`.
fn admit(map: &mut HashMap<String, &'static str>, name: &str, cap: usize) -> &'static str {
    if let Some(label) = map.get(name) {
        return label;
    }
    if map.len() >= cap {
        return OTHER;
    }
    let admitted = label(name);
    map.insert(name.to_string(), admitted);
    admitted
}

impl LabelNames {
    fn read(&self) -> RwLockReadGuard<'_, Names> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Names> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn set_caps(&self, max_agents: usize, max_commands: usize) {
        let mut names = self.write();
        names.max_agents = max_agents;
        names.max_commands = max_commands;
    }

    /// Labels `agents` alone (none: the first seen, up to the cap).
    pub(super) fn name_only(&self, agents: &[String]) {
        let mut names = self.write();
        names.named_only = !agents.is_empty();
        for agent in agents {
            let admitted = label(agent);
            names.agents.insert(agent.clone(), admitted);
        }
    }

    /// The agent's label: its name while under the cap (or when the operator named it),
    /// else `other`.
    pub(super) fn agent(&self, agent: &str) -> &'static str {
        if let Some(label) = self.read().agents.get(agent) {
            return label;
        }
        let mut names = self.write();
        if names.named_only {
            return OTHER;
        }
        let cap = names.max_agents;
        admit(&mut names.agents, agent, cap)
    }

    /// The command's label (under an admitted agent), or `other`.
    pub(super) fn command(&self, agent: &str, command: &str) -> &'static str {
        if let Some(label) = self.read().commands.get(agent).and_then(|c| c.get(command)) {
            return label;
        }
        if self.agent(agent) == OTHER {
            return OTHER;
        }
        let mut names = self.write();
        if names.commands_admitted >= names.max_commands {
            return OTHER;
        }
        let commands = names.commands.entry(agent.to_string()).or_default();
        if let Some(label) = commands.get(command) {
            return label;
        }
        let admitted = label(command);
        commands.insert(command.to_string(), admitted);
        names.commands_admitted += 1;
        admitted
    }

    pub(super) fn route(&self, route: &str) -> &'static str {
        if let Some(label) = self.read().routes.get(route) {
            return label;
        }
        admit(&mut self.write().routes, route, MAX_ROUTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_past_the_cap_fold_into_other() {
        let names = LabelNames::default();
        names.set_caps(2, 3);
        assert_eq!(names.agent("a"), "a");
        assert_eq!(names.agent("b"), "b");
        assert_eq!(names.agent("c"), OTHER);
        assert_eq!(names.agent("a"), "a", "admitted names stay");
        assert_eq!(names.command("a", "x"), "x");
        assert_eq!(names.command("c", "x"), OTHER, "a folded agent's commands fold too");
        assert_eq!(names.command("b", "y"), "y");
        assert_eq!(names.command("b", "z"), "z");
        assert_eq!(names.command("b", "w"), OTHER);
        assert_eq!(names.agent("say \"hi\""), OTHER, "still capped");
        assert_eq!(label("say \"hi\"\n"), "say _hi__", "nothing that breaks the exposition");
    }

    #[test]
    fn named_agents_alone_get_labels() {
        let names = LabelNames::default();
        names.set_caps(50, 10);
        names.name_only(&["shop".to_string(), "desk".to_string()]);
        assert_eq!(names.agent("noisy"), OTHER, "seen first, but not named");
        assert_eq!(names.agent("shop"), "shop");
        assert_eq!(names.agent("desk"), "desk");
        assert_eq!(names.command("shop", "buy"), "buy");
        assert_eq!(names.command("noisy", "spam"), OTHER);
    }
}
