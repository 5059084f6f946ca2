-- (PostgreSQL; as ../0014_plugin_runs.sql.)
-- Plugin runs an agent's owner can read back (`agent-host logs`, /v1/account/.../logs): each
-- run that wrote log lines or did not succeed, with its outcome, duration and the lines
-- (JSON [{at, level, message}]). The host keeps the newest runs per agent and command.
CREATE TABLE plugin_runs (
    id          TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL,
    command     TEXT NOT NULL,
    origin      TEXT NOT NULL,
    started_at  BIGINT NOT NULL,
    duration_ms BIGINT NOT NULL,
    outcome     TEXT NOT NULL,
    error       TEXT,
    lines       TEXT NOT NULL
);
CREATE INDEX plugin_runs_by_command ON plugin_runs(agent_id, command, started_at);
CREATE INDEX plugin_runs_by_agent ON plugin_runs(agent_id, started_at);
