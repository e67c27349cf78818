-- +goose Up

-- An engine's report also says which queues it works and whether it is
-- alive, so that any process can name the queues whose runs no engine will
-- claim: a run started in a queue missing from every engine's Config.Queues
-- stays pending forever, with no error anywhere else.
--
-- queues is the JSON array of the queue names the engine works. live_until
-- is the time (Unix ms, engine clock) until which the engine promises to
-- write its report again: it rewrites it at least once a minute while it
-- runs, so a crashed engine stops counting within a few minutes. stopped_at
-- is when it stopped (0: it has not). Rows written before this migration
-- have live_until 0: their engines count as not alive until they report.
ALTER TABLE flowlite_engine_reports ADD COLUMN queues TEXT NOT NULL DEFAULT '[]';
ALTER TABLE flowlite_engine_reports ADD COLUMN live_until INTEGER NOT NULL DEFAULT 0;
ALTER TABLE flowlite_engine_reports ADD COLUMN stopped_at INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE flowlite_engine_reports DROP COLUMN stopped_at;
ALTER TABLE flowlite_engine_reports DROP COLUMN live_until;
ALTER TABLE flowlite_engine_reports DROP COLUMN queues;
