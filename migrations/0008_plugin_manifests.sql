-- What each uploaded component declared (its manifest(), as JSON), taken once when it is
-- applied: requests read it here and never run a component's manifest() again.
CREATE TABLE plugins (
    hash        TEXT PRIMARY KEY,     -- SHA-256 of the component
    manifest    TEXT NOT NULL,
    size        INTEGER NOT NULL,
    wit_version TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
-- A custom command's plugin reaches the host's LLM only when its agent manifest grants it.
ALTER TABLE commands ADD COLUMN allow_llm INTEGER NOT NULL DEFAULT 0;
