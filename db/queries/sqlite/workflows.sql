-- name: WorkflowRegister :exec
INSERT INTO workflows (name, version, registered_at)
VALUES (@name, @version, @registered_at)
ON CONFLICT (name, version) DO NOTHING;

-- name: WorkflowList :many
SELECT * FROM workflows ORDER BY name, version;
