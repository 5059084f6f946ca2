-- What each uploaded component declared (PostgreSQL; as ../0008_plugin_manifests.sql).
CREATE TABLE plugins (
    hash        TEXT PRIMARY KEY,
    manifest    TEXT NOT NULL,
    size        BIGINT NOT NULL,
    wit_version TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);
ALTER TABLE commands ADD COLUMN allow_llm BOOLEAN NOT NULL DEFAULT FALSE;
