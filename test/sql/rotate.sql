-- Rotation with one-second partitions, so that the test sees partitions expire.
\set VERBOSITY terse
SET outbox.partition_interval = '1s';
SET outbox.retention = '2s';
SET outbox.premake = 2;
-- The earlier tests left events that were never published (how many depends on them).
SET outbox.drop_discards_events = on;
SET client_min_messages = error;
DROP EXTENSION outbox;
RESET client_min_messages;
CREATE EXTENSION outbox;

-- The current partition and two ahead.
SELECT count(*) AS partitions FROM outbox.partitions;

-- Running again soon after makes nothing new, or only the next second's partition.
SELECT count(*) <= 1 AS idempotent FROM outbox.rotate();

-- An event that is never published keeps its partition alive past retention. The two events
-- share a partition (partitions last a second here: the pair is written again if it
-- straddled a boundary).
DO $$
BEGIN
  LOOP
    PERFORM outbox.enqueue('order', 'unpublished', 'OrderCreated', '{}');
    PERFORM outbox.enqueue('order', 'published', 'OrderCreated', '{}');
    EXIT WHEN (SELECT count(DISTINCT tableoid) FROM outbox.events) = 1;
    DELETE FROM outbox.events;
  END LOOP;
END $$;
UPDATE outbox.events SET published_at = now() WHERE aggregateid = 'published';
SELECT tableoid::regclass::text AS kept_partition FROM outbox.events WHERE aggregateid = 'unpublished' \gset

-- Until the partition after the kept one is past retention (and so the kept one): rotate
-- then drops that one (it holds nothing unpublished) and keeps the other.
SELECT regress.wait_until(format($$
  (SELECT upper_bound + current_setting('outbox.retention')::interval <= clock_timestamp()
     FROM outbox.partitions
    WHERE lower_bound = (SELECT upper_bound FROM outbox.partitions WHERE 'outbox.' || quote_ident(name) = %L))$$,
  :'kept_partition')) AS past_retention;
CREATE TEMP TABLE r1 AS SELECT * FROM outbox.rotate();
SELECT action, count(*) > 0 AS some FROM r1 GROUP BY action ORDER BY action;
SELECT 'outbox.' || quote_ident(partition) = :'kept_partition' AS kept_the_right_one
  FROM r1 WHERE action = 'kept';
SELECT aggregateid FROM outbox.events ORDER BY seq;
-- Every partition that was dropped is gone from the catalog and from the bookkeeping.
SELECT count(*) AS dropped_still_present
  FROM r1 JOIN pg_class c ON c.relname = r1.partition AND c.relnamespace = 'outbox'::regnamespace
 WHERE r1.action = 'dropped';
SELECT count(*) AS dropped_still_listed
  FROM r1 JOIN outbox.partitions p ON p.name = r1.partition
 WHERE r1.action = 'dropped';

-- Once published, the partition goes at the next rotation: here delivered as the relay
-- records it, in the delivery log, whose row goes with the partition.
INSERT INTO outbox.deliveries (delivered_at, seqs)
SELECT now(), range_agg(int8range(seq, seq, '[]')) FROM outbox.events WHERE aggregateid = 'unpublished';
SELECT count(*) AS dropped_kept_one FROM outbox.rotate()
 WHERE action = 'dropped' AND 'outbox.' || quote_ident(partition) = :'kept_partition';
SELECT count(*) AS events_left FROM outbox.events;
SELECT count(*) AS delivery_log_rows_left FROM outbox.deliveries;

-- Rotation does not run for a while: enqueue still succeeds. The event goes to the newest
-- partition (with a WARNING) and keeps its true created_at. Waits until the current interval
-- starts after the newest partition ends: a gap that the next rotation covers.
SELECT regress.wait_until($$
  (SELECT max(upper_bound) + current_setting('outbox.partition_interval')::interval <= clock_timestamp()
     FROM outbox.partitions)$$) AS rotation_behind;
SELECT outbox.enqueue('order', 'late', 'OrderCreated', '{}') IS NOT NULL AS enqueued;
SELECT part_at < created_at AS routed_to_newest,
       part_at = (SELECT max(upper_bound) FROM outbox.partitions) - interval '1 microsecond' AS last_instant
  FROM outbox.events WHERE aggregateid = 'late';

-- The next rotation fills the gap with one partition, makes the future ones, and marks
-- the partition that took the late event.
CREATE TEMP TABLE r2 AS SELECT * FROM outbox.rotate();
SELECT count(*) FILTER (WHERE detail LIKE 'covers the time%') AS gap_partitions,
       count(*) FILTER (WHERE action = 'created') >= 3 AS made_future_ones
  FROM r2;
SELECT p.may_hold_late_rows
  FROM outbox.events e JOIN outbox.partitions p ON e.tableoid = ('outbox.' || quote_ident(p.name))::regclass
 WHERE e.aggregateid = 'late';
-- Coverage is contiguous: no gaps between partitions.
SELECT count(*) AS gaps FROM (
  SELECT lower_bound, lag(upper_bound) OVER (ORDER BY lower_bound) AS prev_upper FROM outbox.partitions
) t WHERE prev_upper IS NOT NULL AND prev_upper <> lower_bound;
-- New events go to their own time again.
SELECT outbox.enqueue('order', 'ontime', 'OrderCreated', '{}') IS NOT NULL AS enqueued;
SELECT part_at = created_at AS routed_by_time FROM outbox.events WHERE aggregateid = 'ontime';

-- A future partition dropped by hand leaves a hole: rotation fills it again.
SELECT name AS hole FROM outbox.partitions ORDER BY lower_bound DESC LIMIT 1 OFFSET 1 \gset
ALTER TABLE outbox.events DETACH PARTITION outbox.:"hole";
DROP TABLE outbox.:"hole";
SET client_min_messages = error;  -- whether 'late' is kept with a WARNING depends on timing
SELECT count(*) AS refilled FROM outbox.rotate() WHERE action = 'created' AND partition = :'hole';
RESET client_min_messages;
-- A past partition dropped by hand is forgotten, not an error.
UPDATE outbox.events SET published_at = now();
SELECT name AS hand_dropped FROM outbox.partitions ORDER BY lower_bound LIMIT 1 \gset
ALTER TABLE outbox.events DETACH PARTITION outbox.:"hand_dropped";
DROP TABLE outbox.:"hand_dropped";
SELECT count(*) AS failed FROM outbox.rotate() WHERE partition = :'hand_dropped';
SELECT count(*) AS still_listed FROM outbox.partitions WHERE name = :'hand_dropped';

-- Below the relay's low-water mark, a dead letter and an event waiting for a retry still
-- keep their partitions: rotate reads the mark, then the retry and dead-letter indexes.
SELECT count(outbox.enqueue('order', a, 'OrderCreated', '{}')) AS enqueued
  FROM unnest(ARRAY['dead', 'retrying', 'done']) a;
UPDATE outbox.events SET published_at = now() WHERE aggregateid = 'done';
UPDATE outbox.events SET attempts = 10, dead_at = now() WHERE aggregateid = 'dead';
UPDATE outbox.events SET attempts = 1, next_attempt_at = now() + interval '1 hour'
 WHERE aggregateid = 'retrying';
UPDATE outbox.relay_state SET low_water = (SELECT max(seq) + 1 FROM outbox.events);
-- Until the partitions of these three, and the older ones, are past retention.
SELECT regress.wait_until($$
  (SELECT bool_and(p.upper_bound + current_setting('outbox.retention')::interval <= clock_timestamp())
     FROM outbox.events e JOIN outbox.partitions p ON e.tableoid = ('outbox.' || quote_ident(p.name))::regclass
    WHERE e.aggregateid IN ('dead', 'retrying', 'done'))$$) AS past_retention;
SET client_min_messages = error;
CREATE TEMP TABLE r3 AS SELECT * FROM outbox.rotate();
SELECT count(*) > 0 AS some_dropped FROM r3 WHERE action = 'dropped';
-- What rotation dropped is recorded: replay() refuses a window that starts before it.
SELECT since >= (SELECT max(upper_bound) FROM r3 WHERE action = 'dropped') AS drop_recorded
  FROM outbox.retained_since;
RESET client_min_messages;
SELECT aggregateid FROM outbox.events WHERE aggregateid IN ('dead', 'retrying', 'done') ORDER BY 1;

-- Rotation needs READ COMMITTED: an older snapshot could miss unpublished rows.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM outbox.rotate();
ROLLBACK;

-- retention = 0 keeps everything.
SET outbox.retention = 0;
SELECT count(*) AS dropped FROM outbox.rotate() WHERE action = 'dropped';

-- Back to the defaults for the tests that follow.
RESET outbox.partition_interval;
RESET outbox.retention;
RESET outbox.premake;
DROP EXTENSION outbox;
RESET outbox.drop_discards_events;
CREATE EXTENSION outbox;
