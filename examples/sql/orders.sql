-- The transactional outbox from plain SQL: an order row and its event commit together, or
-- neither does. In the database where CREATE EXTENSION outbox ran:
--   psql -X -q -v ON_ERROR_STOP=1 -f examples/sql/orders.sql
-- It prints one line per transaction; test/t/024_examples.pl reads them.

CREATE TABLE IF NOT EXISTS example_orders (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer text NOT NULL,
    total    numeric(12, 2) NOT NULL
);

-- One order, one event, one transaction. enqueue returns the event's id.
BEGIN;
INSERT INTO example_orders (customer, total) VALUES ('alice', 42.00) RETURNING id AS order_id \gset
SELECT outbox.enqueue('order', :'order_id', 'OrderCreated',
                      jsonb_build_object('order_id', :order_id, 'customer', 'alice', 'total', 42.00)
       ) AS event_id \gset
COMMIT;
\echo committed order=:order_id event=:event_id

-- Several events in one call: enqueue_batch writes all of them or none, and returns their
-- ids in order.
BEGIN;
INSERT INTO example_orders (customer, total) VALUES ('bob', 10.50) RETURNING id AS order_id \gset
SELECT outbox.enqueue_batch(jsonb_build_array(
         jsonb_build_object('aggregatetype', 'order', 'aggregateid', :'order_id', 'type', 'OrderCreated',
                            'payload', jsonb_build_object('order_id', :order_id, 'customer', 'bob', 'total', 10.50)),
         jsonb_build_object('aggregatetype', 'order', 'aggregateid', :'order_id', 'type', 'OrderPaid',
                            'payload', jsonb_build_object('order_id', :order_id, 'amount', 10.50)))
       ) AS event_ids \gset
COMMIT;
\echo committed order=:order_id events=:event_ids

-- A transaction that rolls back takes its event with it: the relay never sees it.
BEGIN;
INSERT INTO example_orders (customer, total) VALUES ('carol', 7.00) RETURNING id AS order_id \gset
SELECT outbox.enqueue('order', :'order_id', 'OrderCreated',
                      jsonb_build_object('order_id', :order_id, 'customer', 'carol', 'total', 7.00)
       ) AS event_id \gset
ROLLBACK;
-- (Reading outbox.events needs a role allowed to: the application role usually is not.)
SELECT (SELECT count(*) FROM example_orders WHERE id = :order_id) AS orders_left,
       (SELECT count(*) FROM outbox.events WHERE id = :'event_id') AS events_left \gset
\echo rolled back order=:order_id event=:event_id orders_left=:orders_left events_left=:events_left
