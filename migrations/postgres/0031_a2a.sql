-- A2A (docs/a2a.md). `agents.a2a`: the manifest's `[a2a]` (JSON): whether the agent's card
-- is listed and its free skills open to callers without a key.
ALTER TABLE agents ADD COLUMN a2a TEXT NOT NULL DEFAULT '{}';
-- `a2a_tasks`: one per message an A2A client sent an agent. `account_id`: the account whose
-- key or OAuth token sent it; NULL for a caller without one (the task is then read by its
-- id alone). `skill`: the command it runs; NULL for a chat turn. `job_id`: the job of a
-- long-running skill, whose state the task follows until it ends (then it is copied here).
-- `request` and `reply` are JSON: what the client said, and what the agent answered.
-- `payment` (JSON) is a paid task's x402 state: the price list it was given, its receipts.
CREATE TABLE a2a_tasks (
    id          TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL,
    account_id  TEXT,
    context_id  TEXT NOT NULL,
    skill       TEXT,
    state       TEXT NOT NULL,
    job_id      TEXT,
    request     TEXT NOT NULL,
    reply       TEXT,
    error       TEXT,
    payment     TEXT,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX a2a_tasks_by_caller ON a2a_tasks (agent_id, account_id, created_at);
CREATE INDEX a2a_tasks_by_context ON a2a_tasks (agent_id, context_id, created_at);
CREATE INDEX a2a_tasks_by_expiry ON a2a_tasks (expires_at);
-- `a2a_push_configs`: where a client asked a task's changes to be pushed (A2A push
-- notifications). `secret`: its token and the credentials for its endpoint, sealed with the
-- master key. Kept as long as the task.
CREATE TABLE a2a_push_configs (
    task_id     TEXT NOT NULL,
    id          TEXT NOT NULL,
    url         TEXT NOT NULL,
    scheme      TEXT,
    secret      BYTEA NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    PRIMARY KEY (task_id, id)
);
CREATE INDEX a2a_push_configs_by_expiry ON a2a_push_configs (expires_at);
