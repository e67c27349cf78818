-- +goose Up

-- definitions holds workflow definitions (flow/flowdef): one row per
-- (name, version), with the SHA-256 of the document and the document
-- itself, as applied (BYTEA: the bytes come back as they were given). A row
-- may be replaced only while no run of its (name, version) exists and no
-- engine registered it; DefinitionGetForUpdate locks the row so that two
-- concurrent applies of one version are decided one after the other.
CREATE TABLE flowlite.definitions (
    name       TEXT   NOT NULL,
    version    BIGINT NOT NULL CHECK (version >= 1),
    hash       TEXT   NOT NULL,
    body       BYTEA  NOT NULL,
    file       TEXT   NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (name, version)
);

-- +goose Down
DROP TABLE flowlite.definitions;
