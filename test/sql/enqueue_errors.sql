-- Every bad input gets a clear error with its SQLSTATE, and nothing is written.

SELECT count(*) AS before FROM outbox.events \gset

SELECT regress.try($$SELECT outbox.enqueue(NULL, '1', 't', '{}')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', NULL, 't', '{}')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', '1', NULL, '{}')$$);
SELECT regress.try($$SELECT outbox.enqueue('', '1', 't', '{}')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', '', 't', '{}')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', '1', '', '{}')$$);
SELECT regress.try($$SELECT outbox.enqueue(repeat('a', 256), '1', 't', '{}')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', repeat('é', 256), 't', '{}')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', '1', repeat('t', 1000), '{}')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', '1', 't', NULL)$$);
SELECT regress.try($$SELECT outbox.enqueue('order', '1', 't', '{}', '[]')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', '1', 't', '{}', '"text"')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', '1', 't', '{}', '{"a": {"nested": "x"}}')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', '1', 't', '{}', '{"a": 1}')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', '1', 't', '{}', '{"a": null}')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', '1', 't', '{}', '{"": "x"}')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', '1', 't', '{}', '{"id": "x"}')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', '1', 't', '{}', '{"tenant": "a", "type": "x"}')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', '1', 't', '{}', NULL, '00000000-0000-0000-0000-000000000000')$$);

SET outbox.max_payload_bytes = 100;
SELECT regress.try($$SELECT outbox.enqueue('order', '1', 't', jsonb_build_object('x', repeat('a', 200)))$$);
RESET outbox.max_payload_bytes;

-- Only superusers change the limit.
CREATE ROLE outbox_limit_tester;
SET ROLE outbox_limit_tester;
SELECT regress.try($$SET outbox.max_payload_bytes = 1000000000$$);
RESET ROLE;
DROP ROLE outbox_limit_tester;

-- Reserved prefix: a misspelt setting is refused instead of silently ignored.
SELECT regress.try($$SET outbox.max_payload_byte = 10$$);

-- Error detail and hint reach the client.
\set VERBOSITY default
SELECT outbox.enqueue('order', repeat('x', 300), 't', '{}');
\set VERBOSITY default

-- A good event followed by a bad one in the same statement: neither is kept.
SELECT regress.try($$SELECT outbox.enqueue('order', k, 't', '{}') FROM unnest(ARRAY['ok', NULL]) k$$);

SELECT count(*) - :before AS rows_written FROM outbox.events;
