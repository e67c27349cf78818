-- name: WorkflowRegister :exec
INSERT INTO flowlite.workflows (name, version, registered_at)
VALUES (@name, @version, @registered_at)
ON CONFLICT (name, version) DO NOTHING;

-- name: WorkflowList :many
SELECT * FROM flowlite.workflows ORDER BY name, version;
