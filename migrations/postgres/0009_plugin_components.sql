-- The uploaded components themselves (PostgreSQL; as ../0009_plugin_components.sql).
ALTER TABLE plugins ADD COLUMN component BYTEA;
