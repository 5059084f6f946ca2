-- Schedules (docs/schedules.md): work an agent does on its own. `timing`, `action` and
-- `delivery` are JSON (`domain::schedule`). `source`: `manifest` (kept in step with the
-- agent's manifest by `agent apply`) or `api`. `status`: `active`, `paused` (by its owner),
-- `stopped` (after failing `schedule_stop_after_failures` times in a row) or `done` (a
-- one-off that ran). `next_run_at`: the time it runs next, NULL when it will not; a host
-- takes a run by moving it forward, in the write that records the run, so each time runs
-- once across hosts.
CREATE TABLE schedules (
    id                   TEXT PRIMARY KEY,
    account_id           TEXT NOT NULL,
    agent_id             TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    name                 TEXT NOT NULL,
    source               TEXT NOT NULL CHECK (source IN ('manifest', 'api')),
    timing               TEXT NOT NULL,
    action               TEXT NOT NULL,
    delivery             TEXT NOT NULL,
    missed               TEXT NOT NULL CHECK (missed IN ('catch_up', 'skip')),
    status               TEXT NOT NULL CHECK (status IN ('active', 'paused', 'stopped', 'done')),
    stopped_reason       TEXT,
    next_run_at          INTEGER,
    last_run_at          INTEGER,
    last_outcome         TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    UNIQUE (agent_id, name)
);
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE status = 'active';
CREATE INDEX schedules_by_account ON schedules (account_id);
-- `schedule_runs`: each time a schedule came due, recorded before its work starts: `running`,
-- then `succeeded` or `failed`; `skipped` when it was missed and its schedule says to skip.
-- `due_at` is the time it was due (one run per time); `deadline_at` the end of the lease its
-- host renews while it runs, so a run still `running` after that was cut off (its host
-- stopped) and is failed by recovery, not run again. The newest runs of each schedule are kept.
CREATE TABLE schedule_runs (
    id          TEXT PRIMARY KEY,
    schedule_id TEXT NOT NULL REFERENCES schedules(id) ON DELETE CASCADE,
    due_at      INTEGER NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('running', 'succeeded', 'failed', 'skipped')),
    started_at  INTEGER NOT NULL,
    deadline_at INTEGER NOT NULL,
    finished_at INTEGER,
    output      TEXT,
    error       TEXT,
    UNIQUE (schedule_id, due_at)
);
CREATE INDEX schedule_runs_running ON schedule_runs (deadline_at) WHERE state = 'running';
