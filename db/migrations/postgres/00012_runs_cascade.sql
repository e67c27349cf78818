-- +goose Up

-- What a deleted run takes with it goes by one statement per table, no
-- longer by foreign keys. Each key's ON DELETE action is a trigger of its
-- own that runs once per deleted row: deleting a batch of 500 finished runs
-- sent 3,500 single-row statements (steps, signals, unique holds,
-- debounces, streams, executions, and the children's parent_id), about
-- 190 µs of the server's time per deleted run, most of the cleaner's cost
-- (BenchmarkCleanPG). The keys also checked every inserted step, signal,
-- hold and stream against runs, a lookup and a row lock on the run each,
-- although every writer inserts them for a run it has just inserted,
-- updated or locked in the same transaction (see 00010_events_cascade.sql,
-- which did the same for events). The statement-level trigger of 00010
-- now deletes from every table that names the run, reading the deleted
-- runs from the statement's transition table. It matches them with
-- = ANY of an array of their IDs, which each table's index on run_id
-- serves: 00010's join of the transition table made the planner hash the
-- whole events table for every batch (a sequential scan of the history of
-- every run kept, 29 ms per 500 runs on a table of 100,000 events). A
-- stream's chunks go by the run too.
ALTER TABLE flowlite.runs DROP CONSTRAINT runs_parent_id_fkey;
ALTER TABLE flowlite.steps DROP CONSTRAINT steps_run_id_fkey;
ALTER TABLE flowlite.signals DROP CONSTRAINT signals_run_id_fkey;
ALTER TABLE flowlite.unique_holds DROP CONSTRAINT unique_holds_run_id_fkey;
ALTER TABLE flowlite.debounces DROP CONSTRAINT debounces_run_id_fkey;
ALTER TABLE flowlite.streams DROP CONSTRAINT streams_run_id_fkey;
ALTER TABLE flowlite.executions DROP CONSTRAINT executions_run_id_fkey;
ALTER TABLE flowlite.stream_chunks DROP CONSTRAINT stream_chunks_run_id_stream_fkey;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION flowlite.runs_delete_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ids text[] := ARRAY(SELECT g.id FROM gone AS g);
BEGIN
    DELETE FROM flowlite.events WHERE run_id = ANY (ids);
    DELETE FROM flowlite.steps WHERE run_id = ANY (ids);
    DELETE FROM flowlite.signals WHERE run_id = ANY (ids);
    DELETE FROM flowlite.unique_holds WHERE run_id = ANY (ids);
    DELETE FROM flowlite.debounces WHERE run_id = ANY (ids);
    DELETE FROM flowlite.stream_chunks WHERE run_id = ANY (ids);
    DELETE FROM flowlite.streams WHERE run_id = ANY (ids);
    DELETE FROM flowlite.executions WHERE run_id = ANY (ids);
    UPDATE flowlite.runs SET parent_id = NULL WHERE parent_id = ANY (ids);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION flowlite.runs_delete_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM flowlite.events AS e USING gone AS g WHERE e.run_id = g.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

UPDATE flowlite.runs AS r SET parent_id = NULL
WHERE r.parent_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM flowlite.runs AS p WHERE p.id = r.parent_id);
DELETE FROM flowlite.steps AS t WHERE NOT EXISTS (SELECT 1 FROM flowlite.runs AS r WHERE r.id = t.run_id);
DELETE FROM flowlite.signals AS t WHERE NOT EXISTS (SELECT 1 FROM flowlite.runs AS r WHERE r.id = t.run_id);
DELETE FROM flowlite.unique_holds AS t WHERE NOT EXISTS (SELECT 1 FROM flowlite.runs AS r WHERE r.id = t.run_id);
DELETE FROM flowlite.debounces AS t WHERE NOT EXISTS (SELECT 1 FROM flowlite.runs AS r WHERE r.id = t.run_id);
DELETE FROM flowlite.stream_chunks AS t WHERE NOT EXISTS (SELECT 1 FROM flowlite.runs AS r WHERE r.id = t.run_id);
DELETE FROM flowlite.streams AS t WHERE NOT EXISTS (SELECT 1 FROM flowlite.runs AS r WHERE r.id = t.run_id);
DELETE FROM flowlite.executions AS t WHERE NOT EXISTS (SELECT 1 FROM flowlite.runs AS r WHERE r.id = t.run_id);
ALTER TABLE flowlite.runs ADD CONSTRAINT runs_parent_id_fkey
    FOREIGN KEY (parent_id) REFERENCES flowlite.runs (id) ON DELETE SET NULL;
ALTER TABLE flowlite.steps ADD CONSTRAINT steps_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES flowlite.runs (id) ON DELETE CASCADE;
ALTER TABLE flowlite.signals ADD CONSTRAINT signals_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES flowlite.runs (id) ON DELETE CASCADE;
ALTER TABLE flowlite.unique_holds ADD CONSTRAINT unique_holds_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES flowlite.runs (id) ON DELETE CASCADE;
ALTER TABLE flowlite.debounces ADD CONSTRAINT debounces_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES flowlite.runs (id) ON DELETE CASCADE;
ALTER TABLE flowlite.streams ADD CONSTRAINT streams_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES flowlite.runs (id) ON DELETE CASCADE;
ALTER TABLE flowlite.executions ADD CONSTRAINT executions_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES flowlite.runs (id) ON DELETE CASCADE;
ALTER TABLE flowlite.stream_chunks ADD CONSTRAINT stream_chunks_run_id_stream_fkey
    FOREIGN KEY (run_id, stream) REFERENCES flowlite.streams (run_id, stream) ON DELETE CASCADE;
