-- The uploaded components themselves, content-addressed beside their manifests: every host
-- sharing the database can run every agent's plugin; a host's data dir keeps only a copy
-- and its compiled artifacts. Rows recorded before this are filled in at start from the
-- data dir's copy.
ALTER TABLE plugins ADD COLUMN component BLOB;
