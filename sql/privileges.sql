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
-- Every function pins search_path.
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
INSERT INTO outbox.events (id, aggregatetype, aggregateid, type, payload, created_at, part_at)
VALUES (gen_random_uuid(), 'o', '1', 't', '{}', now(), now());
UPDATE outbox.events SET published_at = now();
SELECT * FROM outbox.rotate();
SELECT * FROM outbox._create_partition(now(), now() + interval '1 day');
RESET ROLE;

SELECT count(*) AS written_by_app FROM outbox.events WHERE aggregateid = 'granted';

-- A role without the grant is refused, even with access to the schema.
GRANT USAGE ON SCHEMA outbox TO app_nobody;
SET ROLE app_nobody;
SELECT outbox.enqueue('order', '1', 'OrderCreated', '{}');
RESET ROLE;

REVOKE ALL ON SCHEMA outbox FROM app_writer, app_nobody;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA outbox FROM app_writer;
DROP ROLE app_writer;
DROP ROLE app_nobody;
