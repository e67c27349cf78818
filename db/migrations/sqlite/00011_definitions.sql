-- +goose Up

-- definitions holds workflow definitions (flow/flowdef): one row per
-- (name, version), with the SHA-256 of the document and the document
-- itself, as applied. A row may be replaced only while no run of its
-- (name, version) exists and no engine registered it; after that a change
-- is a new version, so that runs stay on the definition they started on.
CREATE TABLE flowlite_definitions (
    name       TEXT    NOT NULL,
    version    INTEGER NOT NULL CHECK (version >= 1),
    hash       TEXT    NOT NULL,
    body       BLOB    NOT NULL,
    file       TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (name, version)
) STRICT;

-- +goose Down
DROP TABLE flowlite_definitions;
