-- The extension installs with its schema, tables and functions.
CREATE EXTENSION outbox;
SELECT extversion FROM pg_extension WHERE extname = 'outbox';

\d outbox.events

-- CREATE EXTENSION makes no partition (a restore from pg_dump brings its own): the first
-- enqueue makes them, as outbox.rotate() would: the current one and premake (4) ahead.
SELECT count(*) AS partitions_before_first_enqueue FROM outbox.partitions;
SELECT outbox.enqueue('order', 'first', 'OrderCreated', '{}') IS NOT NULL AS enqueued;
SELECT tableoid::regclass IS NOT NULL AS routed FROM outbox.events;
DELETE FROM outbox.events;
SELECT count(*) AS partitions,
       bool_and(lower_bound <= now() OR lower_bound > now()) AS all_have_bounds,
       bool_or(lower_bound <= now() AND now() < upper_bound) AS covers_now
  FROM outbox.partitions;
SELECT count(*) AS attached FROM pg_inherits WHERE inhparent = 'outbox.events'::regclass;

-- Partitions belong to the schema, not to the extension, so that rotation can drop them.
SELECT count(*) AS partitions_in_extension
  FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'outbox')
   AND c.relname LIKE 'events\_2%';

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
GRANT USAGE ON SCHEMA regress TO PUBLIC;
