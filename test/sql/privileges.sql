-- Least privilege: PUBLIC can call nothing; an application role needs exactly the GRANTs
-- the README gives.
\set VERBOSITY terse
CREATE ROLE app_writer LOGIN;
CREATE ROLE app_nobody LOGIN;

-- No function in the schema is executable by a role without grants.
SELECT p.proname
  FROM pg_proc p
 WHERE p.pronamespace = 'outbox'::regnamespace
   AND has_function_privilege('app_nobody', p.oid, 'EXECUTE')
 ORDER BY 1;
-- Every function pins search_path, except the C functions on the hot path: enqueue,
-- enqueue_batch and inbox_receive, whose SQL is schema-qualified, without operator or
-- unqualified function names (see below); _next_seq, the column default, which runs no
-- SQL; and shard_of, whose SQL names only pg_catalog objects (a SET clause would keep it
-- from being inlined into the relay's queries).
SELECT p.proname
  FROM pg_proc p
 WHERE p.pronamespace = 'outbox'::regnamespace
   AND NOT coalesce(array_to_string(p.proconfig, ',') LIKE '%search_path=pg_catalog, pg_temp%', false)
 ORDER BY 1;

SET ROLE app_writer;
SELECT outbox.enqueue('order', '1', 'OrderCreated', '{}');
RESET ROLE;

-- The README's grant for an application role:
GRANT USAGE ON SCHEMA outbox TO app_writer;
GRANT EXECUTE ON FUNCTION outbox.enqueue(text, text, text, jsonb, jsonb, uuid),
                          outbox.enqueue_batch(jsonb) TO app_writer;

SET ROLE app_writer;
SELECT outbox.enqueue('order', 'granted', 'OrderCreated', '{}') IS NOT NULL AS enqueued;
SELECT cardinality(outbox.enqueue_batch('[{"aggregatetype": "o", "aggregateid": "granted", "type": "t", "payload": {}}]')) AS batch;
-- ... and nothing more: no reading or forging rows, no rotation.
SELECT count(*) FROM outbox.events;
SELECT count(*) FROM outbox.event_status;
INSERT INTO outbox.events (id, aggregatetype, aggregateid, type, payload, created_at, part_at)
VALUES (gen_random_uuid(), 'o', '1', 't', '{}', now(), now());
UPDATE outbox.events SET published_at = now();
INSERT INTO outbox.deliveries VALUES (now(), '{[1,1000000]}');
SELECT * FROM outbox.rotate();
SELECT * FROM outbox._create_partition(now(), now() + interval '1 day');
RESET ROLE;

SELECT count(*) AS written_by_app FROM outbox.events WHERE aggregateid = 'granted';
-- docs/security.md's grant for an operator role reads every event's delivery state.
GRANT USAGE ON SCHEMA outbox TO app_nobody;
GRANT SELECT ON outbox.dead_letters, outbox.event_status TO app_nobody;
SET ROLE app_nobody;
-- Without EXECUTE on the function through which it asks the delivery log: refused.
SELECT state, count(*) FROM outbox.event_status WHERE aggregateid = 'granted' GROUP BY state;
RESET ROLE;
GRANT EXECUTE ON FUNCTION outbox._delivered_at(bigint) TO app_nobody;
SET ROLE app_nobody;
SELECT state, count(*) FROM outbox.event_status WHERE aggregateid = 'granted' GROUP BY state;
RESET ROLE;
REVOKE SELECT ON outbox.dead_letters, outbox.event_status FROM app_nobody;
REVOKE EXECUTE ON FUNCTION outbox._delivered_at(bigint) FROM app_nobody;
REVOKE USAGE ON SCHEMA outbox FROM app_nobody;

-- A hostile search_path cannot redirect enqueue: a look-alike table (also in pg_temp) and
-- look-alike functions in schemas the caller puts first change nothing. (The cached plan
-- is parsed again under the new search_path, so this is a real test of name lookup.)
CREATE SCHEMA trap;
GRANT USAGE, CREATE ON SCHEMA trap TO app_writer;
SET ROLE app_writer;
CREATE TABLE trap.events (id uuid, aggregatetype text, aggregateid text, type text, payload jsonb,
                          headers jsonb, created_at timestamptz, part_at timestamptz);
CREATE FUNCTION trap.nextval(regclass) RETURNS bigint LANGUAGE sql AS 'SELECT -1::bigint';
CREATE FUNCTION trap.varchar(text, integer, boolean) RETURNS text LANGUAGE sql AS 'SELECT ''hijacked''';
SET search_path = trap, pg_catalog, public;
CREATE TEMP TABLE events (id uuid);
SET search_path = pg_temp, trap, pg_catalog, public;
SELECT outbox.enqueue('order', 'hostile', 'OrderCreated', '{"ok": true}') IS NOT NULL AS enqueued;
SELECT cardinality(outbox.enqueue_batch('[{"aggregatetype": "order", "aggregateid": "hostile", "type": "t", "payload": {"ok": true}}]')) AS batch;
RESET search_path;
SELECT count(*) AS in_trap FROM trap.events;
RESET ROLE;
-- Nor inbox_receive, granted as docs/security.md grants it to a consumer, with look-alikes of
-- its table and of the function that makes its first partitions.
GRANT EXECUTE ON FUNCTION outbox.inbox_receive(text, uuid, timestamptz) TO app_writer;
SET ROLE app_writer;
CREATE TABLE trap.inbox (event_at timestamptz, received_at timestamptz, event_id uuid, consumer text);
CREATE FUNCTION trap._create_inbox_partitions(timestamptz) RETURNS SETOF record LANGUAGE sql AS 'SELECT NULL::record';
CREATE FUNCTION trap.count(anyelement) RETURNS bigint LANGUAGE sql AS 'SELECT -1::bigint';
SET search_path = trap, pg_catalog, public;
CREATE TEMP TABLE inbox (event_id uuid);
SET search_path = pg_temp, trap, pg_catalog, public;
SELECT outbox.inbox_receive('hostile', '00000000-0000-4000-8000-000000000001', now()) AS new,
       outbox.inbox_receive('hostile', '00000000-0000-4000-8000-000000000001', now()) AS again;
RESET search_path;
SELECT count(*) AS in_trap FROM trap.inbox;
RESET ROLE;
SELECT consumer, event_id FROM outbox.inbox WHERE consumer = 'hostile';
SELECT aggregateid, payload, seq > 0 AS real_seq FROM outbox.events WHERE aggregateid = 'hostile' ORDER BY seq;
-- Nor shard_of (no SET clause, so that it is inlined): it names pg_catalog's hashtext and
-- operators, not look-alikes that come first in the path.
SELECT outbox.shard_of('order', 'hostile') AS shard_plain \gset
CREATE FUNCTION trap.hashtext(text) RETURNS integer LANGUAGE sql AS 'SELECT 7';
SET search_path = trap, pg_catalog, public;
SELECT outbox.shard_of('order', 'hostile') = :shard_plain AS shard_unchanged,
       hashtext('x') AS trap_in_path;
RESET search_path;
DROP SCHEMA trap CASCADE;

-- A role without the grant is refused, even with access to the schema.
GRANT USAGE ON SCHEMA outbox TO app_nobody;
SET ROLE app_nobody;
SELECT outbox.enqueue('order', '1', 'OrderCreated', '{}');
RESET ROLE;

-- Roles are cluster-wide: leave none behind, so that make installcheck can run again on the
-- same server (DROP OWNED also drops app_writer's temp table).
DROP OWNED BY app_writer, app_nobody;
DROP ROLE app_writer;
DROP ROLE app_nobody;
