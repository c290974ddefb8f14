-- The extension installs with its schema, tables, functions and first partitions.
CREATE EXTENSION outbox;
SELECT extversion FROM pg_extension WHERE extname = 'outbox';
-- The loaded library's version: the same as the SQL's.
SELECT outbox.version() = extversion AS same_version FROM pg_extension WHERE extname = 'outbox';

\d outbox.events

-- premake (4) future partitions plus the current one, attached to outbox.events.
SELECT count(*) AS partitions,
       bool_and(lower_bound <= now() OR lower_bound > now()) AS all_have_bounds,
       bool_or(lower_bound <= now() AND now() < upper_bound) AS covers_now
  FROM outbox.partitions;
SELECT count(*) AS attached FROM pg_inherits WHERE inhparent = 'outbox.events'::regclass;

-- Each partition has its own indexes, made with it; none mentions published_at (marking an
-- event published is a heap-only update).
SELECT regexp_replace(pg_get_indexdef(i.indexrelid), 'events_[0-9]+_[0-9]+', 'events_P', 'g') AS partition_index
  FROM pg_index i
 WHERE i.indrelid = (SELECT format('outbox.%I', name)::regclass FROM outbox.partitions ORDER BY lower_bound LIMIT 1)
 ORDER BY 1;
-- The delivery log's seqs are kept out of line and uncompressed: e (external).
SELECT attstorage FROM pg_attribute
 WHERE attrelid = 'outbox.deliveries'::regclass AND attname = 'seqs';

-- Partitions belong to the schema, not to the extension, so that rotation can drop them.
SELECT count(*) AS partitions_in_extension
  FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'outbox')
   AND c.relname LIKE 'events\_2%';

-- Run as pg_dump's scripts run it (row_security = off), CREATE EXTENSION makes no partition:
-- the restore brings them. Should none come, the first enqueue makes them, as rotate() would.
SET outbox.drop_discards_events = on;
DROP EXTENSION outbox;
RESET outbox.drop_discards_events;
SET row_security = off;
CREATE EXTENSION outbox;
RESET row_security;
SELECT count(*) AS partitions_after_restore_like_install FROM outbox.partitions;
SELECT outbox.enqueue('order', 'first', 'OrderCreated', '{}') IS NOT NULL AS enqueued;
SELECT count(*) AS partitions, bool_or(lower_bound <= now() AND now() < upper_bound) AS covers_now
  FROM outbox.partitions;
DELETE FROM outbox.events;

-- Settings exist with their defaults once the library is loaded.
SELECT name, setting, unit FROM pg_settings WHERE name LIKE 'outbox.%' ORDER BY name;

-- For the tests that follow: runs a statement and returns its SQLSTATE and message.
CREATE SCHEMA regress;
CREATE FUNCTION regress.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ' ' || SQLERRM;
END
$$;
-- Waits until a condition holds (tried every 50 ms, for three minutes at most): tests
-- wait for partitions to pass retention, not for a fixed time.
CREATE FUNCTION regress.wait_until(condition text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_deadline timestamptz := clock_timestamp() + interval '3 min';
    v_holds    boolean;
BEGIN
    LOOP
        EXECUTE 'SELECT ' || condition INTO v_holds;
        EXIT WHEN v_holds;
        IF clock_timestamp() > v_deadline THEN
            RAISE EXCEPTION 'still false after 3 minutes: %', condition;
        END IF;
        PERFORM pg_sleep(0.05);
    END LOOP;
    RETURN true;
END
$$;
GRANT USAGE ON SCHEMA regress TO PUBLIC;
