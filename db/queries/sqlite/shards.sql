-- name: ShardGet :one
-- ShardGet returns the file's place in its shard set; no row when the
-- file belongs to none.
SELECT * FROM flowlite_shard WHERE id = 1;

-- name: ShardPut :exec
-- ShardPut records the file's place in a shard set, replacing the record
-- of a set whose creation did not finish.
INSERT INTO flowlite_shard (id, set_id, shard_index, shard_count, created_at)
VALUES (1, @set_id, @shard_index, @shard_count, @now)
ON CONFLICT (id) DO UPDATE SET
  set_id = excluded.set_id,
  shard_index = excluded.shard_index,
  shard_count = excluded.shard_count,
  created_at = excluded.created_at;
