-- Knowledge entries as vectors of the embedding model, so chat finds entries by meaning.
-- Keyed by the model and the SHA-256 of the entry's text: an entry shared by agents, or kept
-- when its manifest changes, is embedded once; a changed entry is a new row.
CREATE TABLE knowledge_vectors (
    model      TEXT NOT NULL,
    hash       TEXT NOT NULL,
    vector     BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (model, hash)
);
