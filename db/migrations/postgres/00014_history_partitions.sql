-- +goose Up

-- Partitioned history (pgstore.Options.HistoryPartitions;
-- docs/postgresql-production.md, "Partitioned history"). Off by default: these are the tables and functions
-- the option uses, and nothing changes until history_partition is called.
--
-- With the option on, events (the history of every run, most of the rows a
-- run writes) is a table partitioned by time (RANGE on at), one partition
-- per span, and retention drops a partition whole once every run with
-- history in it can go, instead of deleting each event row by row, which
-- leaves dead tuples in the table and its two indexes for vacuum to find.
-- runs, steps and the other tables keep one or two rows per run and stay as
-- they are; the runs a dropped partition held are deleted with it, in the
-- same transaction, so no run ever outlives a part of its history.
--
-- The three functions run as the schema's owner (SECURITY DEFINER, with
-- no search_path but the catalog's: every name in them is qualified), so
-- that engines running as a role that may only read and write the tables
-- (docs/postgresql-production.md, "Roles and privileges") can turn the
-- option on and make and drop partitions, which only an owner may.
--
-- history_partitioning holds the span (one row; none: the option is off).
-- history_partitions names each range partition of events and its bounds:
-- lo = -9223372036854775808 for the partition that took the table's rows
-- from before the option (events_before). events_default (the DEFAULT
-- partition) takes the rows of a clock ahead of every partition made yet;
-- the next partition made takes them from it.
CREATE TABLE flowlite.history_partitioning (
    id      integer PRIMARY KEY CHECK (id = 1),
    span_ms bigint  NOT NULL CHECK (span_ms > 0)
);

CREATE TABLE flowlite.history_partitions (
    name text   PRIMARY KEY,
    lo   bigint NOT NULL,
    hi   bigint NOT NULL UNIQUE
);

-- history_partitions_ensure makes the partitions of events that cover up to
-- three spans past now_ms, each span after the newest one made. Another
-- engine doing it already (the advisory lock) or a lock not granted within
-- 2 s (a long reader of events) leaves it to the next call: until then
-- new events go to events_default, which loses nothing.
-- +goose StatementBegin
CREATE FUNCTION flowlite.history_partitions_ensure(now_ms bigint) RETURNS integer LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    span bigint;
    lo   bigint;
    hi   bigint;
    name text;
    made integer := 0;
BEGIN
    SELECT p.span_ms INTO span FROM flowlite.history_partitioning AS p WHERE p.id = 1;
    IF span IS NULL OR NOT pg_try_advisory_xact_lock(hashtext('flowlite.history_partitions')) THEN
        RETURN 0;
    END IF;
    SELECT max(p.hi) INTO lo FROM flowlite.history_partitions AS p;
    lo := coalesce(lo, now_ms / span * span); -- none left: from the current span
    BEGIN
        SET LOCAL lock_timeout = '2s';
        WHILE lo < now_ms + 3 * span LOOP
            hi := (lo / span + 1) * span;
            name := 'events_p' || lo;
            EXECUTE format('CREATE TABLE flowlite.%I (LIKE flowlite.events INCLUDING DEFAULTS)', name);
            -- Attaching checks that the default partition holds none of
            -- the range: what it took meanwhile moves in first. Statements
            -- on a partition fire none of the parent's statement triggers,
            -- so the move purges nothing from the feed's point of view.
            EXECUTE format('WITH moved AS (DELETE FROM flowlite.events_default WHERE at >= %s AND at < %s RETURNING *) '
                           'INSERT INTO flowlite.%I SELECT * FROM moved', lo, hi, name);
            EXECUTE format('ALTER TABLE flowlite.events ATTACH PARTITION flowlite.%I FOR VALUES FROM (%s) TO (%s)', name, lo, hi);
            INSERT INTO flowlite.history_partitions (name, lo, hi) VALUES (name, lo, hi);
            made := made + 1;
            lo := hi;
        END LOOP;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 0; -- the block's partitions were rolled back with it
    END;
    RETURN made;
END
$$;
-- +goose StatementEnd

-- history_partition turns the option on with a span of span_ms, or changes
-- the span of the partitions made from now on. The first time, events
-- becomes a partitioned table: the table as it was becomes its first
-- partition (events_before, every row kept, IDs and their sequence
-- included), under an exclusive lock held for the whole change.
-- +goose StatementBegin
CREATE FUNCTION flowlite.history_partition(span_ms bigint, now_ms bigint) RETURNS void LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    seq    text;
    last   bigint;
    called boolean;
    bound  bigint;
BEGIN
    IF span_ms <= 0 THEN
        RAISE EXCEPTION 'history partition span must be positive, got % ms', span_ms;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('flowlite.history_partitions'));
    IF (SELECT c.relkind FROM pg_class AS c WHERE c.oid = 'flowlite.events'::regclass) <> 'p' THEN
        LOCK TABLE flowlite.events IN ACCESS EXCLUSIVE MODE;
        seq := pg_get_serial_sequence('flowlite.events', 'id');
        EXECUTE format('SELECT last_value, is_called FROM %s', seq) INTO last, called;
        bound := (greatest(now_ms, coalesce((SELECT max(e.at) FROM flowlite.events AS e), 0)) / span_ms + 1) * span_ms;
        ALTER TABLE flowlite.events RENAME TO events_before;
        -- The parent's primary key has the partition key in it: (id, at),
        -- which attaching builds for the old rows in place of (id).
        ALTER TABLE flowlite.events_before DROP CONSTRAINT events_pkey;
        ALTER INDEX flowlite.events_run RENAME TO events_before_run;
        DROP TRIGGER events_purged ON flowlite.events_before;
        -- An identity column cannot be a partitioned table's on
        -- PostgreSQL 15: the IDs come from a sequence of the same name,
        -- which goes on from where the identity's stood.
        ALTER TABLE flowlite.events_before ALTER COLUMN id DROP IDENTITY;
        CREATE SEQUENCE flowlite.events_id_seq;
        PERFORM setval('flowlite.events_id_seq', last, called);
        CREATE TABLE flowlite.events (LIKE flowlite.events_before INCLUDING DEFAULTS) PARTITION BY RANGE (at);
        ALTER TABLE flowlite.events ALTER COLUMN id SET DEFAULT nextval('flowlite.events_id_seq');
        ALTER SEQUENCE flowlite.events_id_seq OWNED BY flowlite.events.id;
        ALTER TABLE flowlite.events ADD PRIMARY KEY (id, at);
        CREATE INDEX events_run ON flowlite.events (run_id, id);
        EXECUTE format('ALTER TABLE flowlite.events ATTACH PARTITION flowlite.events_before FOR VALUES FROM (MINVALUE) TO (%s)', bound);
        CREATE TABLE flowlite.events_default PARTITION OF flowlite.events DEFAULT;
        CREATE TRIGGER events_purged AFTER DELETE ON flowlite.events
        REFERENCING OLD TABLE AS gone
        FOR EACH STATEMENT EXECUTE FUNCTION flowlite.events_note_purge();
        INSERT INTO flowlite.history_partitions (name, lo, hi) VALUES ('events_before', -9223372036854775808, bound);
    END IF;
    INSERT INTO flowlite.history_partitioning (id, span_ms) VALUES (1, span_ms)
    ON CONFLICT (id) DO UPDATE SET span_ms = EXCLUDED.span_ms;
    PERFORM flowlite.history_partitions_ensure(now_ms);
END
$$;
-- +goose StatementEnd

-- history_partitions_drop drops, oldest first, up to max_partitions
-- partitions of events that end before the newest of the three horizons
-- and in which every run with history can go: it finished before its
-- state's horizon (completed_before, failed_before, cancelled_before;
-- the smallest bigint keeps that state for good), its parent, if any,
-- finished, and, with wait_for_feed, the feed's slowest consumer read all
-- its events. Those runs are deleted with the partition, in one
-- transaction: what they have in other partitions and in the other tables
-- goes row by row, as in RunDeleteFinished (runs_delete_events skips the
-- partition being dropped). A partition any other run has history in is
-- kept whole, and the cleaner's row deletes take its runs one by one later
-- (store.HistoryPartitioner). The feed's purged_through moves past the
-- highest ID dropped. Returns the partitions dropped and the runs deleted.
-- +goose StatementBegin
CREATE FUNCTION flowlite.history_partitions_drop(
    completed_before bigint, failed_before bigint, cancelled_before bigint,
    wait_for_feed boolean, max_partitions integer,
    OUT partitions integer, OUT runs bigint
) LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    keep_after bigint := 9223372036854775807;
    p          record;
    kept       bigint;
    due        bigint;
    gone       bigint;
    top        bigint;
    deletable  text := $d$
        r.status IN ('completed', 'failed', 'cancelled')
        AND r.finished_at < CASE r.status WHEN 'completed' THEN %1$s WHEN 'failed' THEN %2$s ELSE %3$s END
        AND (r.parent_id IS NULL OR NOT EXISTS (
            SELECT 1 FROM flowlite.runs AS q
            WHERE q.id = r.parent_id AND q.status NOT IN ('completed', 'failed', 'cancelled')))$d$;
    -- Waiting for the feed, a run whose events a consumer has not read is
    -- kept: a probe of events per run, left out when nothing waits.
    unread     text := $d$
        AND NOT EXISTS (SELECT 1 FROM flowlite.events AS f WHERE f.run_id = r.id AND f.id > %s)$d$;
BEGIN
    partitions := 0;
    runs := 0;
    IF wait_for_feed THEN
        SELECT coalesce(min(c.position), keep_after) INTO keep_after FROM flowlite.feed_consumers AS c;
    END IF;
    deletable := format(deletable, completed_before, failed_before, cancelled_before);
    IF wait_for_feed THEN
        deletable := deletable || format(unread, keep_after);
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtext('flowlite.history_partitions')) THEN
        RETURN;
    END IF;
    -- A run another transaction holds, or a reader of events in the way of
    -- the drop, leaves that partition to the next call. The statements
    -- below scan a partition once each: compiling them (JIT, which their
    -- estimated costs would call for) takes longer than it saves.
    SET LOCAL lock_timeout = '2s';
    SET LOCAL jit = off;
    FOR p IN
        SELECT h.name, h.lo, h.hi FROM flowlite.history_partitions AS h
        WHERE h.hi <= greatest(completed_before, failed_before, cancelled_before)
        ORDER BY h.hi LIMIT max_partitions
    LOOP
        BEGIN
            -- One scan of the partition counts its runs and those that
            -- retention still keeps (deletable false or unknown).
            EXECUTE format('SELECT count(*) FILTER (WHERE (%s) IS NOT TRUE), count(*) FROM flowlite.runs AS r '
                           'WHERE r.id IN (SELECT e.run_id FROM flowlite.%I AS e)', deletable, p.name) INTO kept, due;
            CONTINUE WHEN kept > 0;
            -- Events of no run (appended after their run's delete) are
            -- no reason to keep it, but a consumer of the feed waited for
            -- reads them: the drop moves purged_through to the top.
            EXECUTE format('SELECT max(e.id) FROM flowlite.%I AS e', p.name) INTO top;
            CONTINUE WHEN top > keep_after;
            PERFORM set_config('flowlite.history_dropping', p.lo || ':' || p.hi, true);
            EXECUTE format('DELETE FROM flowlite.runs AS r WHERE r.id IN (SELECT e.run_id FROM flowlite.%I AS e) AND %s',
                           p.name, deletable);
            GET DIAGNOSTICS gone = ROW_COUNT;
            PERFORM set_config('flowlite.history_dropping', '', true);
            IF gone <> due THEN
                -- A run changed since the test: keep the partition, and
                -- undo this one's deletes (the block's savepoint).
                RAISE EXCEPTION USING ERRCODE = 'FLP01';
            END IF;
            UPDATE flowlite.feed AS f SET purged_through = top WHERE f.id = 1 AND top > f.purged_through;
            EXECUTE format('DROP TABLE flowlite.%I', p.name);
            DELETE FROM flowlite.history_partitions AS h WHERE h.name = p.name;
            partitions := partitions + 1;
            runs := runs + gone;
        EXCEPTION WHEN SQLSTATE 'FLP01' OR lock_not_available THEN
            NULL;
        END;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- runs_delete_events (00012) skips the rows of the partition that
-- history_partitions_drop is dropping (flowlite.history_dropping, "lo:hi",
-- set for its transaction only), which go with the partition.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION flowlite.runs_delete_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ids      text[] := ARRAY(SELECT g.id FROM gone AS g);
    dropping text   := coalesce(current_setting('flowlite.history_dropping', true), '');
    lo       bigint;
    hi       bigint;
BEGIN
    IF dropping = '' THEN
        DELETE FROM flowlite.events WHERE run_id = ANY (ids);
    ELSE
        lo := split_part(dropping, ':', 1)::bigint;
        hi := split_part(dropping, ':', 2)::bigint;
        DELETE FROM flowlite.events WHERE run_id = ANY (ids) AND at < lo;
        DELETE FROM flowlite.events WHERE run_id = ANY (ids) AND at >= hi;
    END IF;
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
-- A partitioned events table becomes one table again, every row and the
-- sequence's position kept.
-- +goose StatementBegin
DO $$
DECLARE
    last   bigint;
    called boolean;
BEGIN
    IF (SELECT c.relkind FROM pg_class AS c WHERE c.oid = 'flowlite.events'::regclass) = 'p' THEN
        LOCK TABLE flowlite.events IN ACCESS EXCLUSIVE MODE;
        SELECT s.last_value, s.is_called INTO last, called FROM flowlite.events_id_seq AS s;
        CREATE TABLE flowlite.events_whole (LIKE flowlite.events);
        INSERT INTO flowlite.events_whole SELECT * FROM flowlite.events ORDER BY id;
        DROP TABLE flowlite.events;
        ALTER TABLE flowlite.events_whole RENAME TO events;
        ALTER TABLE flowlite.events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY;
        PERFORM setval(pg_get_serial_sequence('flowlite.events', 'id'), last, called);
        ALTER TABLE flowlite.events ADD CONSTRAINT events_pkey PRIMARY KEY (id);
        CREATE INDEX events_run ON flowlite.events (run_id, id);
        CREATE TRIGGER events_purged AFTER DELETE ON flowlite.events
        REFERENCING OLD TABLE AS gone
        FOR EACH STATEMENT EXECUTE FUNCTION flowlite.events_note_purge();
    END IF;
END
$$;
-- +goose StatementEnd

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

DROP FUNCTION flowlite.history_partitions_drop(bigint, bigint, bigint, boolean, integer);
DROP FUNCTION flowlite.history_partition(bigint, bigint);
DROP FUNCTION flowlite.history_partitions_ensure(bigint);
DROP TABLE flowlite.history_partitions;
DROP TABLE flowlite.history_partitioning;
