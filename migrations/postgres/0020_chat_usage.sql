-- (PostgreSQL; as ../0020_chat_usage.sql.)
-- Chat tokens per agent and UTC day, for its owner: every chat adds its prompt and
-- completion tokens (all its rounds, embedded model or remote provider) to its day's row.
-- Rows stay when the agent is deleted, as its payments and jobs do.
CREATE TABLE chat_usage (
    account_id        TEXT NOT NULL,
    agent_id          TEXT NOT NULL,
    day               TEXT NOT NULL,
    chats             BIGINT NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    PRIMARY KEY (agent_id, day)
);
