-- outbox.enqueue_batch writes many events in one call and returns their ids in order.

SELECT count(*) AS before FROM outbox.events \gset

SELECT cardinality(outbox.enqueue_batch($$[
  {"aggregatetype": "order", "aggregateid": "b1", "type": "OrderCreated", "payload": {"n": 1}},
  {"aggregatetype": "order", "aggregateid": "b1", "type": "OrderPaid", "payload": [1, 2],
   "headers": {"tenant": "t1"}},
  {"aggregatetype": "customer", "aggregateid": "c9", "type": "Renamed", "payload": "x",
   "id": "0190a3c5-0000-7000-8000-0000000000b3"}
]$$)) AS ids;

SELECT aggregatetype, aggregateid, type, payload, headers,
       id = '0190a3c5-0000-7000-8000-0000000000b3' AS given_id
  FROM outbox.events WHERE aggregateid IN ('b1', 'c9') ORDER BY seq;

-- The returned ids are the stored ids, in array order.
CREATE TEMP TABLE bulk_ids AS
SELECT u.id, u.ord
  FROM unnest(outbox.enqueue_batch(
         (SELECT jsonb_agg(jsonb_build_object('aggregatetype', 'bulk', 'aggregateid', (i % 7)::text,
                                              'type', 'Tick', 'payload', jsonb_build_object('i', i)))
            FROM generate_series(1, 1000) i))) WITH ORDINALITY AS u(id, ord);
SELECT count(*) AS returned,
       count(*) FILTER (WHERE e.payload->>'i' = b.ord::text) AS matched
  FROM bulk_ids b JOIN outbox.events e ON e.id = b.id;

SELECT outbox.enqueue_batch('[]') AS empty;
SELECT outbox.enqueue_batch(NULL) AS null_in_null_out;

-- Bad input: the error names the event, and the whole batch is refused.
SELECT regress.try($$SELECT outbox.enqueue_batch('{"aggregatetype": "x"}')$$);
SELECT regress.try($$SELECT outbox.enqueue_batch('[1]')$$);
SELECT regress.try($$SELECT outbox.enqueue_batch('[{"aggregatetype": "o", "aggregateid": "1", "type": "t", "payload": {}},
                                                  {"aggregatetype": "o", "aggregate_id": "1", "type": "t", "payload": {}}]')$$);
SELECT regress.try($$SELECT outbox.enqueue_batch('[{"aggregatetype": "o", "aggregateid": 1, "type": "t", "payload": {}}]')$$);
SELECT regress.try($$SELECT outbox.enqueue_batch('[{"aggregatetype": "o", "aggregateid": "1", "type": "t"}]')$$);
SELECT regress.try($$SELECT outbox.enqueue_batch('[{"aggregatetype": "o", "aggregateid": "1", "type": "t", "payload": {}, "id": "nope"}]')$$);
SELECT regress.try($$SELECT outbox.enqueue_batch('[{"aggregatetype": "o", "aggregateid": "1", "type": "t", "payload": {}, "id": 5}]')$$);
SELECT regress.try($$SELECT outbox.enqueue_batch('[{"aggregatetype": "o", "aggregateid": "1", "type": "t", "payload": {}},
                                                  {"aggregatetype": "o", "aggregateid": "1", "type": "t", "payload": {}, "headers": {"h": 1}}]')$$);

SELECT count(*) - :before AS rows_written FROM outbox.events;
