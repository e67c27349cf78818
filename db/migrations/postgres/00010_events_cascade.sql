-- +goose Up

-- Events go with their runs, but no longer through a foreign key. The key
-- checked every inserted event against runs, one lookup per row by a
-- trigger of its own: half the server's time of a COPY of run_started
-- events, and a lookup for each of the events every claim and outcome
-- appends. Every writer appends events of a run it has just inserted,
-- updated or locked in the same transaction, so the check never caught
-- anything; what the key did on delete, a statement-level trigger does
-- now, with one DELETE per deleting statement, reading the deleted runs
-- from the statement's transition table (events_run serves it).
--
-- A run deleted while a transaction that has not locked it appends an
-- event to it: the key made that append wait (it locks the run's row
-- against deletion) and fail; now the delete's trigger, which takes a new
-- snapshot once the run's row lock is granted, removes what committed
-- before it, and an append committed after the delete leaves an event of
-- no run, which no read of a run's history returns.
ALTER TABLE flowlite.events DROP CONSTRAINT events_run_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION flowlite.runs_delete_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM flowlite.events AS e USING gone AS g WHERE e.run_id = g.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER runs_delete_events AFTER DELETE ON flowlite.runs
REFERENCING OLD TABLE AS gone
FOR EACH STATEMENT EXECUTE FUNCTION flowlite.runs_delete_events();

-- +goose Down
DROP TRIGGER runs_delete_events ON flowlite.runs;
DROP FUNCTION flowlite.runs_delete_events();
DELETE FROM flowlite.events AS e WHERE NOT EXISTS (SELECT 1 FROM flowlite.runs AS r WHERE r.id = e.run_id);
ALTER TABLE flowlite.events ADD CONSTRAINT events_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES flowlite.runs (id) ON DELETE CASCADE;
