-- outbox.enqueue writes the event in the caller's transaction.
CREATE TABLE orders (id int PRIMARY KEY, total numeric);

BEGIN;
INSERT INTO orders VALUES (1, 10.5);
SELECT outbox.enqueue('order', '1', 'OrderCreated', '{"total": 10.5}') IS NOT NULL AS enqueued;
COMMIT;

-- Rolled back together with the business row: no event.
BEGIN;
INSERT INTO orders VALUES (2, 99);
SELECT outbox.enqueue('order', '2', 'OrderCreated', '{"total": 99}') IS NOT NULL AS enqueued;
ROLLBACK;

-- A failure later in the transaction also takes the event away.
BEGIN;
SELECT outbox.enqueue('order', '3', 'OrderCreated', '{}') IS NOT NULL AS enqueued;
INSERT INTO orders VALUES (1, 0);  -- duplicate key
COMMIT;

SELECT aggregatetype, aggregateid, type, payload, headers, published_at, attempts,
       created_at = part_at AS routed_by_created_at
  FROM outbox.events ORDER BY seq;

-- Headers and a caller-chosen id are kept as given.
SELECT outbox.enqueue('order', '4', 'OrderPaid', '{"amount": 1}',
                      '{"traceparent": "00-abc-def-01", "tenant": "t1"}',
                      '0190a3c5-0000-7000-8000-000000000001') AS id;
SELECT id, headers FROM outbox.events WHERE aggregateid = '4';

-- Default ids are UUIDv7 (version nibble 7, variant 10), their time is the write time,
-- and within one session they increase with insert order.
SELECT count(outbox.enqueue('order', 'seq', 'Tick', to_jsonb(i))) AS enqueued
  FROM generate_series(1, 200) i;
SELECT bool_and(substr(id::text, 15, 1) = '7') AS version7,
       bool_and(substr(id::text, 20, 1) IN ('8', '9', 'a', 'b')) AS variant10,
       bool_and(abs(extract(epoch FROM created_at) * 1000
                    - ('x' || lpad(replace(substr(id::text, 1, 13), '-', ''), 16, '0'))::bit(64)::bigint) < 2)
           AS time_matches
  FROM outbox.events WHERE aggregateid = 'seq';
SELECT count(*) = 200 AS all_rows,
       bool_and(id_order = seq_order) AS ids_follow_insert_order
  FROM (SELECT row_number() OVER (ORDER BY id) AS id_order,
               row_number() OVER (ORDER BY seq) AS seq_order
          FROM outbox.events WHERE aggregateid = 'seq') t;

-- Text is measured in characters, not bytes: 255 multi-byte characters are accepted.
SELECT outbox.enqueue(repeat('é', 255), 'k', 't', '{}') IS NOT NULL AS accepted;

-- The payload limit is a setting.
SET outbox.max_payload_bytes = '1kB';
SELECT outbox.enqueue('order', '5', 'Big', jsonb_build_object('x', repeat('a', 900))) IS NOT NULL AS fits;
RESET outbox.max_payload_bytes;

-- Headers have a limit of their own (outbox.max_headers_bytes): they travel with every
-- message and count toward the relay's batch_max_bytes.
SET outbox.max_headers_bytes = '1kB';
SELECT regress.try($$SELECT outbox.enqueue('order', '6', 't', '{}', jsonb_build_object('h', repeat('a', 2000)))$$);
SELECT outbox.enqueue('order', '6', 't', '{}', jsonb_build_object('h', repeat('a', 900))) IS NOT NULL AS fits;
RESET outbox.max_headers_bytes;

-- A given id is an idempotency key: the same call again writes nothing and returns the id;
-- another event with that id is refused (23505). Also within one enqueue_batch.
SELECT outbox.enqueue('order', '7', 'Paid', '{"amount": 1}', '{"h": "v"}', '11111111-1111-1111-1111-111111111111');
SELECT outbox.enqueue('order', '7', 'Paid', '{"amount": 1}', '{"h": "v"}', '11111111-1111-1111-1111-111111111111');
SELECT regress.try($$SELECT outbox.enqueue('order', '7', 'Paid', '{"amount": 2}', '{"h": "v"}', '11111111-1111-1111-1111-111111111111')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', '7', 'Paid', '{"amount": 1}', NULL, '11111111-1111-1111-1111-111111111111')$$);
SELECT regress.try($$SELECT outbox.enqueue('order', '8', 'Paid', '{"amount": 1}', '{"h": "v"}', '11111111-1111-1111-1111-111111111111')$$);
SELECT count(*) AS written_once FROM outbox.events WHERE id = '11111111-1111-1111-1111-111111111111';
SELECT outbox.enqueue_batch('[
  {"aggregatetype": "order", "aggregateid": "9", "type": "t", "payload": {}, "id": "22222222-2222-2222-2222-222222222222"},
  {"aggregatetype": "order", "aggregateid": "9", "type": "t", "payload": {}, "id": "22222222-2222-2222-2222-222222222222"}]') AS same_id_twice;
SELECT count(*) AS written_once FROM outbox.events WHERE id = '22222222-2222-2222-2222-222222222222';
SELECT regress.try($$SELECT outbox.enqueue_batch('[
  {"aggregatetype": "order", "aggregateid": "9", "type": "t", "payload": {}, "id": "33333333-3333-3333-3333-333333333333"},
  {"aggregatetype": "order", "aggregateid": "9", "type": "t", "payload": {"other": 1}, "id": "33333333-3333-3333-3333-333333333333"}]')$$);
SELECT count(*) AS nothing_written FROM outbox.events WHERE id = '33333333-3333-3333-3333-333333333333';

-- enqueue writes its row straight into the partition. A trigger on outbox.events (or a
-- policy, a CHECK, a column someone added) needs the executor: enqueue then runs an INSERT,
-- and the trigger fires. Both ways write the same row.
CREATE FUNCTION regress.saw_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE 'trigger saw % %', NEW.aggregatetype, NEW.aggregateid;
  RETURN NEW;
END $$;
CREATE TRIGGER saw_event BEFORE INSERT ON outbox.events
  FOR EACH ROW EXECUTE FUNCTION regress.saw_event();
SELECT outbox.enqueue('order', 'trig', 't', '{"n": 1}') IS NOT NULL AS written;
DROP TRIGGER saw_event ON outbox.events;
DROP FUNCTION regress.saw_event();
SELECT outbox.enqueue('order', 'trig', 't', '{"n": 1}') IS NOT NULL AS written;
SELECT count(*) AS rows, count(DISTINCT tableoid) AS partitions,
       bool_and(attempts = 0 AND published_at IS NULL AND next_attempt_at IS NULL
                AND dead_at IS NULL AND last_error IS NULL AND part_at = created_at
                AND payload = '{"n": 1}' AND headers IS NULL) AS same_row,
       max(seq) > min(seq) AS seq_drawn
  FROM outbox.events WHERE aggregateid = 'trig';

-- enqueue gives a row an entry in every index whose predicate holds, and none in a partial
-- index whose predicate is "column IS NOT NULL" for a column the row leaves NULL (the relay's
-- _retry and _dead indexes, which it does not open): read back through each index.
CREATE FUNCTION regress.uses_index(query text, index text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
    IF line LIKE '%' || index || '%' THEN RETURN true; END IF;
  END LOOP;
  RETURN false;
END $$;
DO $$
DECLARE part text := (SELECT e.tableoid::regclass::text FROM outbox.events e
                       WHERE aggregateid = 'trig' LIMIT 1);
BEGIN
  EXECUTE format('CREATE INDEX regress_headers ON %s (aggregateid) WHERE headers IS NOT NULL', part);
  EXECUTE format('CREATE INDEX regress_type ON %s (aggregateid) WHERE type = %L', part, 'pi');
END $$;
SELECT outbox.enqueue('order', 'pi', 'pi', '{}', '{"h": "1"}') IS NOT NULL AS written;
SELECT outbox.enqueue('order', 'pi', 'pi', '{}', '{"h": "2"}') IS NOT NULL AS written;
SELECT outbox.enqueue('order', 'pi', 'pi', '{}') IS NOT NULL AS written;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT regress.uses_index($$SELECT aggregateid FROM outbox.events
                            WHERE aggregateid = 'pi' AND headers IS NOT NULL$$, 'regress_headers')
       AS by_headers_index,
       (SELECT count(*) FROM outbox.events WHERE aggregateid = 'pi' AND headers IS NOT NULL)
       AS with_headers;
SELECT regress.uses_index($$SELECT aggregateid FROM outbox.events
                            WHERE aggregateid = 'pi' AND type = 'pi'$$, 'regress_type')
       AS by_type_index,
       (SELECT count(*) FROM outbox.events WHERE aggregateid = 'pi' AND type = 'pi') AS of_type;
-- The relay's retry marks its rows through the executor, which gives them their entries.
UPDATE outbox.events SET next_attempt_at = now() WHERE aggregateid = 'pi';
SELECT regress.uses_index($$SELECT seq FROM outbox.events
                            WHERE next_attempt_at IS NOT NULL AND aggregateid = 'pi'$$, '_retry')
       AS by_retry_index,
       (SELECT count(*) FROM outbox.events
         WHERE next_attempt_at IS NOT NULL AND aggregateid = 'pi') AS retrying;
RESET enable_seqscan;
RESET enable_bitmapscan;
DELETE FROM outbox.events WHERE aggregateid = 'pi';
DROP INDEX outbox.regress_headers, outbox.regress_type;
DROP FUNCTION regress.uses_index(text, text);

-- In a read-only transaction, the error an INSERT gives there.
BEGIN READ ONLY;
SELECT regress.try($$SELECT outbox.enqueue('order', 'ro', 't', '{}')$$);
ROLLBACK;
