-- Sign-in with the wallet that paid (x402's sign-in-with-x). `commands.sign_in`: what a
-- wallet that signs in may use without paying (JSON `{pass, free}`; null: nothing).
-- `sign_in_uses`: every sign-in that was let in, by its challenge's nonce, which is
-- therefore used once, ever; `counted` is cleared when the work failed by the agent's
-- fault, so the call is given back.
ALTER TABLE commands ADD COLUMN sign_in TEXT;
CREATE TABLE sign_in_uses (
    nonce    TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    command  TEXT NOT NULL,
    network  TEXT NOT NULL,
    wallet   TEXT NOT NULL,
    kind     TEXT NOT NULL CHECK (kind IN ('pass', 'free')),
    used_at  INTEGER NOT NULL,
    counted  INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX sign_in_uses_by_wallet ON sign_in_uses (agent_id, command, network, wallet, kind, used_at);
-- A wallet's last served payment for a command starts its pass.
CREATE INDEX payments_served_by_payer ON payments (agent_id, network, payer, command, created_at) WHERE state = 'served';
