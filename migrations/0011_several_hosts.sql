-- What several hosts sharing one database need (see ../README.md, "Several hosts"):
-- * jobs.lease_until: a running job's host renews it while the job runs; a job whose lease
--   ran out was cut off (its host died), and is failed rather than run twice.
-- * rate_counters: request counts per window that every host adds to (the keyed API's
--   per-account limits, the x402 limits per client address and per payer), so limits hold
--   across hosts. A single SQLite host counts in memory and leaves this table empty.
ALTER TABLE jobs ADD COLUMN lease_until INTEGER;

CREATE TABLE rate_counters (
    scope        TEXT NOT NULL,      -- account | x402_client | x402_payer
    key          TEXT NOT NULL,
    minute_start INTEGER NOT NULL,   -- Unix ms
    minute_count INTEGER NOT NULL,
    day_start    INTEGER NOT NULL,
    day_count    INTEGER NOT NULL,
    PRIMARY KEY (scope, key)
);

-- Facts every process using this database must agree on, e.g. a value sealed with the
-- master key, so a host given another key refuses to start instead of failing to open
-- the secrets other hosts sealed.
CREATE TABLE deployment_facts (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
