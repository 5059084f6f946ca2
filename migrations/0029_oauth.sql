-- OAuth 2.1 for the agents' MCP endpoints (docs/mcp.md, "Sign in with OAuth").
-- `oauth_clients`: clients registered dynamically (RFC 7591); clients named by their
-- metadata document's URL are fetched when they ask, never stored. `secret_hash`: the
-- SHA-256 of a confidential client's secret. `oauth_codes`: authorization codes, by id,
-- the secret part hashed; `grant_id` is set when the code is exchanged, so it is used once
-- (and a replay revokes what it gave). `oauth_grants`: what a person allowed a client,
-- for one agent's MCP endpoint (`resource`). `oauth_tokens`: the grant's access and refresh
-- tokens, hashed; a refresh token is `replaced_at` when it was used (rotation): used again,
-- the whole grant is revoked. A grant keeps the key that allowed it (`key_id`): it works
-- only while that key does.
CREATE TABLE oauth_clients (
    id            TEXT PRIMARY KEY,
    name          TEXT,
    redirect_uris TEXT NOT NULL,
    auth_method   TEXT NOT NULL,
    secret_hash   BLOB,
    metadata      TEXT NOT NULL,
    created_at    INTEGER NOT NULL
);
CREATE TABLE oauth_codes (
    id             TEXT PRIMARY KEY,
    secret_hash    BLOB NOT NULL,
    account_id     TEXT NOT NULL,
    agent_id       TEXT NOT NULL,
    client_id      TEXT NOT NULL,
    client_name    TEXT,
    redirect_uri   TEXT NOT NULL,
    resource       TEXT NOT NULL,
    scope          TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    key_id         TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL,
    grant_id       TEXT
);
CREATE TABLE oauth_grants (
    id           TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    client_id    TEXT NOT NULL,
    client_name  TEXT,
    resource     TEXT NOT NULL,
    scope        TEXT NOT NULL,
    key_id       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);
CREATE INDEX oauth_grants_by_account ON oauth_grants (account_id, created_at);
CREATE INDEX oauth_grants_by_client ON oauth_grants (client_id);
CREATE INDEX oauth_codes_by_client ON oauth_codes (client_id);
CREATE TABLE oauth_tokens (
    id          TEXT PRIMARY KEY,
    grant_id    TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
    secret_hash BLOB NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    replaced_at INTEGER
);
CREATE INDEX oauth_tokens_by_grant ON oauth_tokens (grant_id);
