-- name: DefinitionInsert :execrows
INSERT INTO flowlite.definitions (name, version, hash, body, file, created_at, updated_at)
VALUES (@name, @version, @hash, @body, @file, @now, @now)
ON CONFLICT (name, version) DO NOTHING;

-- name: DefinitionGet :one
SELECT * FROM flowlite.definitions WHERE name = @name AND version = @version;

-- name: DefinitionGetForUpdate :one
SELECT * FROM flowlite.definitions WHERE name = @name AND version = @version FOR UPDATE;

-- name: DefinitionLatest :one
SELECT * FROM flowlite.definitions WHERE name = @name ORDER BY version DESC LIMIT 1;

-- name: DefinitionList :many
SELECT d.name, d.version, d.hash, d.file, d.created_at, d.updated_at,
       (EXISTS (SELECT 1 FROM flowlite.runs r WHERE r.workflow = d.name AND r.version = d.version)
        OR EXISTS (SELECT 1 FROM flowlite.workflows w WHERE w.name = d.name AND w.version = d.version)) AS in_use
FROM flowlite.definitions d
ORDER BY d.name, d.version;

-- name: DefinitionInUse :one
SELECT (EXISTS (SELECT 1 FROM flowlite.runs r WHERE r.workflow = @name AND r.version = @version)
        OR EXISTS (SELECT 1 FROM flowlite.workflows w WHERE w.name = @name AND w.version = @version)) AS in_use;

-- name: DefinitionReplace :execrows
UPDATE flowlite.definitions SET hash = @hash, body = @body, file = @file, updated_at = @now
WHERE name = @name AND version = @version;
