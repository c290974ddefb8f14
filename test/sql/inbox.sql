-- The consumer's inbox: inbox_receive() says whether a consumer has seen an event before,
-- and records it in the caller's transaction. Records are filed by the event's own time and
-- rotated with the events.
SET outbox.partition_interval = '1d';

-- An inbox never used has no partition, and rotation makes none.
SELECT count(*) AS inbox_rows FROM outbox.rotate() WHERE partition LIKE 'inbox%';
SELECT count(*) AS partitions FROM pg_inherits WHERE inhparent = 'outbox.inbox'::regclass;

-- Every bad input: its error, and nothing written.
SELECT regress.try($$SELECT outbox.inbox_receive(NULL, '01936f5e-7c00-7000-8000-000000000001')$$);
SELECT regress.try($$SELECT outbox.inbox_receive('', '01936f5e-7c00-7000-8000-000000000001')$$);
SELECT regress.try($$SELECT outbox.inbox_receive(repeat('é', 256), '01936f5e-7c00-7000-8000-000000000001')$$);
SELECT regress.try($$SELECT outbox.inbox_receive('billing', NULL)$$);
SELECT regress.try($$SELECT outbox.inbox_receive('billing', '00000000-0000-0000-0000-000000000000', now())$$);
SELECT regress.try($$SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440000')$$);
SELECT regress.try($$SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440000', 'infinity')$$);
SELECT regress.try($$SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440000', '294276-12-31 23:59:59+00')$$);
SELECT regexp_replace(regress.try($$SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440000', now() + interval '30 days')$$),
                      '\(.*\)', '(...)') AS far_future;
SELECT count(*) AS written FROM outbox.inbox;

-- An event id from enqueue (a UUIDv7): new once per consumer.
SELECT outbox.enqueue('order', 'inbox', 'OrderCreated', '{}') AS id \gset
SELECT outbox.inbox_receive('billing', :'id') AS first,
       outbox.inbox_receive('billing', :'id') AS again,
       outbox.inbox_receive('shipping', :'id') AS other_consumer;
-- The first call that got this far made the partitions: one covering outbox.inbox_retention
-- back, today, and outbox.premake days ahead.
SELECT count(*) AS partitions,
       min(lower_bound) = outbox._bucket_start(now() - interval '7 days', 86400) AS from_retention,
       max(upper_bound) = outbox._bucket_start(now(), 86400) + interval '5 days' AS to_premake
  FROM outbox.inbox_partitions;

-- Its own time files it: a time passed along changes nothing.
SELECT outbox.inbox_receive('billing', :'id', now() - interval '3 days') AS with_a_time;
-- Any other id is filed by the time given, which must be the same for every copy.
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440000', now() - interval '3 days') AS v4_first,
       outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440000', now() - interval '3 days') AS v4_again;
-- Rolled back, the record is gone with the consumer's work: the event is new again.
BEGIN;
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440001', now()) AS in_rolled_back;
ROLLBACK;
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440001', now()) AS after_rollback;
SELECT consumer, event_id = :'id' AS from_enqueue,
       tableoid::regclass::text = 'outbox.' || (SELECT name FROM outbox.inbox_partitions
                                                  WHERE event_at >= lower_bound AND event_at < upper_bound) AS right_partition
  FROM outbox.inbox ORDER BY consumer, event_id;

-- Older than any partition (past outbox.inbox_retention): no record can tell a copy, so each
-- copy counts as new (at least once, never lost).
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440002', now() - interval '30 days') AS old,
       outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440002', now() - interval '30 days') AS old_again;

-- Rotation drops the partitions past outbox.inbox_retention, with their records.
SET outbox.inbox_retention = '1s';
SELECT action, detail FROM outbox.rotate() WHERE partition LIKE 'inbox%';
SELECT count(*) AS records_left FROM outbox.inbox;
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440000', now() - interval '3 days') AS v4_after_its_partition_went;
RESET outbox.inbox_retention;
-- A partition dropped by hand leaves a hole: nothing recorded there, and rotation goes on.
SELECT name AS tomorrow FROM outbox.inbox_partitions
 WHERE lower_bound = outbox._bucket_start(now(), 86400) + interval '1 day' \gset
DROP TABLE outbox.:"tomorrow";
SELECT outbox.inbox_receive('billing', '550e8400-e29b-41d4-a716-446655440003', now() + interval '1 day') AS in_the_hole;
SELECT count(*) AS rotated FROM outbox.rotate_inbox();
SELECT count(*) AS listed_dropped FROM outbox.inbox_partitions WHERE name = :'tomorrow';
DELETE FROM outbox.inbox;
DELETE FROM outbox.events WHERE aggregateid = 'inbox';
RESET outbox.partition_interval;
