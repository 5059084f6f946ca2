-- What several hosts sharing one database need (PostgreSQL; as ../0011_several_hosts.sql):
-- running jobs' leases, and request counters every host adds to.
ALTER TABLE jobs ADD COLUMN lease_until BIGINT;

CREATE TABLE rate_counters (
    scope        TEXT NOT NULL,
    key          TEXT NOT NULL,
    minute_start BIGINT NOT NULL,
    minute_count BIGINT NOT NULL,
    day_start    BIGINT NOT NULL,
    day_count    BIGINT NOT NULL,
    PRIMARY KEY (scope, key)
);

-- Facts every process using this database must agree on (a value sealed with the master key).
CREATE TABLE deployment_facts (
    name  TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);
