-- +goose Up

-- flowlite's tables, indexes and schema version live in their own namespace,
-- the prefix flowlite_, so that they can share a database file with the
-- application's own tables (an application table named runs or events
-- included): that is what makes RunTx steps exactly-once with the
-- application's data.
--
-- Migrations 00001 to 00009 create their objects under the prefix, so a new
-- database never holds a table without it. A database migrated before the
-- prefix existed (its versions in goose's default table goose_db_version,
-- beside flowlite's unprefixed tables) is moved into the namespace by
-- internal/migrate before goose runs, in one transaction: ALTER TABLE ...
-- RENAME TO flowlite_... for every table (SQLite rewrites the REFERENCES
-- clauses of the others), and each index dropped and created again under
-- its prefixed name, as SQLite cannot rename an index. It has to happen
-- outside goose because goose must find its version table under the new
-- name. This version marks that step: an older database reports it as
-- pending, so every tool knows the database needs 'migrate up'.
SELECT 1;

-- +goose Down
SELECT 1;
