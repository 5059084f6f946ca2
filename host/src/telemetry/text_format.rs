//! Prometheus's older text format (0.0.4), for scrapers that do not accept OpenMetrics:
//! the same exposition, with a counter's family named with its `_total` and the `# UNIT`
//! and `# EOF` lines gone.

/// The exposition `openmetrics` in the older text format.
pub fn from_openmetrics(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters.contains(name).then(|| format!("{prefix}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_take_their_total_and_units_and_the_end_go() {
        let openmetrics = "# HELP agent_host_plugin_runs Command runs\n# TYPE agent_host_plugin_runs counter\nagent_host_plugin_runs_total{outcome=\"failed\"} 1\n# HELP http_server_request_duration_seconds Duration\n# TYPE http_server_request_duration_seconds histogram\n# UNIT http_server_request_duration_seconds seconds\nhttp_server_request_duration_seconds_count 1\n# EOF\n";
        assert_eq!(
            from_openmetrics(openmetrics),
            "# HELP agent_host_plugin_runs_total Command runs\n# TYPE agent_host_plugin_runs_total counter\nagent_host_plugin_runs_total{outcome=\"failed\"} 1\n# HELP http_server_request_duration_seconds Duration\n# TYPE http_server_request_duration_seconds histogram\nhttp_server_request_duration_seconds_count 1\n"
        );
    }
}
