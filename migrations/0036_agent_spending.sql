-- What agents pay for the x402 services their commands call (docs/spending.md).
-- `agents.payments`: the manifest's `[payments]` (JSON), what the owner lets it spend; NULL:
-- nothing.
ALTER TABLE agents ADD COLUMN payments TEXT;
-- `agent_spending`: each payment, recorded before it is signed: `signing`, then `sent` (the
-- signed payment went with the retried request), then `settled` (the payee answered with
-- success), `refused` (it answered 402 again) or `unknown` (another answer, or none). `void`:
-- nothing was signed (the wallet or chain failed first). Every state but `void` counts
-- against the daily maximum: a signed payment can be settled by its payee until it expires,
-- whatever it answered. Rows outlive their agent: they are money that left a wallet.
CREATE TABLE agent_spending (
    id           TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    command      TEXT NOT NULL,
    network      TEXT NOT NULL CHECK (network IN ('base', 'solana')),
    x402_version INTEGER NOT NULL,
    amount       BIGINT NOT NULL CHECK (amount > 0),
    pay_to       TEXT NOT NULL,
    resource     TEXT NOT NULL,
    payer        TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('signing', 'sent', 'settled', 'refused', 'unknown', 'void')),
    transaction_id TEXT,
    error        TEXT,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
CREATE INDEX agent_spending_by_agent ON agent_spending (agent_id, created_at);
CREATE INDEX agent_spending_by_account ON agent_spending (account_id, created_at);
