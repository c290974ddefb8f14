-- Dead letters in bulk: requeue_dead() and discard_dead() pick them by filter, count them
-- first on request (dry_run), and log who did what.
\set VERBOSITY terse
SET outbox.partition_interval = '1d';
SET outbox.retention = '1d';

-- Six dead letters: two types, two errors, dead one to six hours ago.
SELECT count(outbox.enqueue('dlq', i::text, CASE WHEN i <= 3 THEN 'Paid' ELSE 'Shipped' END, '{}'))
  FROM generate_series(1, 6) i;
UPDATE outbox.events SET attempts = 10, dead_at = now() - (aggregateid || ' hours')::interval,
       last_error = CASE WHEN aggregateid::int % 2 = 0 THEN 'HTTP 400: bad request' ELSE 'timeout' END
 WHERE aggregatetype = 'dlq';

-- Dry runs count, and write nothing.
SELECT outbox.requeue_dead(aggregatetype => 'dlq', dry_run => true) AS all_dlq,
       outbox.discard_dead(aggregatetype => 'dlq', type => 'Paid', dry_run => true) AS paid,
       outbox.discard_dead(aggregatetype => 'dlq', error_like => 'HTTP 4%', dry_run => true) AS http_4xx,
       outbox.requeue_dead(aggregatetype => 'dlq', dead_after => now() - interval '150 minutes',
                           dry_run => true) AS last_150_minutes,
       outbox.requeue_dead(aggregatetype => 'dlq', dead_before => now() - interval '270 minutes',
                           dry_run => true) AS before_270_minutes,
       outbox.requeue_dead(aggregatetype => 'none such', dry_run => true) AS none;
SELECT count(*) AS logged FROM outbox.dead_letter_actions;
SELECT count(*) AS still_dead FROM outbox.dead_letters WHERE aggregatetype = 'dlq';

-- Bad input.
SELECT regress.try($$SELECT outbox.requeue_dead(dry_run => NULL)$$);
SELECT regress.try($$SELECT outbox.discard_dead(dead_after => now(), dead_before => now() - interval '1 hour')$$);
-- Filters bounded: a name no event can have (longer than 255 characters, or empty) is
-- refused, a megabyte one included; so is a LIKE pattern over 1000 characters. At the limits,
-- accepted.
SELECT regress.try($$SELECT outbox.requeue_dead(aggregatetype => repeat('a', 1000000))$$);
SELECT regress.try($$SELECT outbox.discard_dead(type => repeat('é', 256), dry_run => true)$$);
SELECT regress.try($$SELECT outbox.discard_dead(aggregatetype => '')$$);
SELECT regress.try($$SELECT outbox.requeue_dead(error_like => repeat('%', 1001))$$);
SELECT outbox.requeue_dead(aggregatetype => repeat('a', 255), type => repeat('t', 255),
                           error_like => repeat('%', 1000), dry_run => true) AS at_the_limits;

-- Discard the Paid ones that failed with a 4xx: no longer dead letters, not sent, kept.
SELECT outbox.discard_dead(aggregatetype => 'dlq', type => 'Paid', error_like => 'HTTP 4%') AS discarded;
SELECT aggregateid, state FROM outbox.event_status WHERE aggregatetype = 'dlq' ORDER BY aggregateid::int;
SELECT count(*) AS dead_letters FROM outbox.dead_letters WHERE aggregatetype = 'dlq';
-- Requeue takes dead letters only, not the discarded one.
SELECT outbox.requeue_dead(aggregatetype => 'dlq', dry_run => true) AS would_requeue;
SELECT outbox.requeue_dead(aggregatetype => 'dlq', type => 'Shipped') AS requeued;
SELECT aggregateid, state, attempts FROM outbox.event_status WHERE aggregatetype = 'dlq' ORDER BY aggregateid::int;
-- Each action that acted is logged: by whom (the session's user), with which filter, on how
-- many events.
SELECT by_user = session_user AS by_me, action, filter, events FROM outbox.dead_letter_actions ORDER BY at, action;
-- requeue() of its id sends a discarded event after all.
SELECT outbox.requeue(id) AS requeued_by_id FROM outbox.events WHERE aggregatetype = 'dlq' AND discarded_at IS NOT NULL;
SELECT count(*) FILTER (WHERE state = 'discarded') AS discarded_left FROM outbox.event_status WHERE aggregatetype = 'dlq';

-- The server log's line gives the filter cut at 1000 characters (the whole of it is in
-- outbox.dead_letter_actions): long filters make no log line of their size.
SELECT outbox.enqueue('dlq-log', '1', 'Paid', '{}') IS NOT NULL AS enqueued;
UPDATE outbox.events SET attempts = 10, dead_at = now(), last_error = 'timeout'
 WHERE aggregatetype = 'dlq-log';
CREATE ROLE dead_letter_logger;
GRANT USAGE ON SCHEMA outbox TO dead_letter_logger;
GRANT EXECUTE ON FUNCTION outbox.discard_dead(text, text, text, timestamptz, timestamptz, boolean)
   TO dead_letter_logger;
SET SESSION AUTHORIZATION dead_letter_logger;
SET client_min_messages = log;
SELECT outbox.discard_dead(aggregatetype => 'dlq-log', type => 'Paid',
                           error_like => 'timeout' || repeat('%', 993)) AS discarded;
RESET client_min_messages;
RESET SESSION AUTHORIZATION;
SELECT length(filter->>'error_like') AS logged_whole FROM outbox.dead_letter_actions
 WHERE filter->>'aggregatetype' = 'dlq-log';
REVOKE ALL ON FUNCTION outbox.discard_dead(text, text, text, timestamptz, timestamptz, boolean)
  FROM dead_letter_logger;
REVOKE USAGE ON SCHEMA outbox FROM dead_letter_logger;
DROP ROLE dead_letter_logger;
DELETE FROM outbox.events WHERE aggregatetype = 'dlq-log';

-- Rotation: a dead letter keeps its partition past retention; once discarded, the partition
-- goes. (The relay's mark is moved past it, as a running relay's would be.)
SELECT outbox._create_partition(date_trunc('day', now()) - interval '10 days',
                                date_trunc('day', now()) - interval '9 days') AS old_partition \gset
INSERT INTO outbox.events (id, aggregatetype, aggregateid, type, payload, created_at, part_at,
                           dead_at, attempts, last_error)
VALUES (gen_random_uuid(), 'dlq-old', '1', 'Paid', '{}', now() - interval '10 days',
        date_trunc('day', now()) - interval '10 days', now() - interval '9 days', 10, 'HTTP 400');
SELECT low_water AS saved_low_water FROM outbox.relay_state \gset
UPDATE outbox.relay_state SET low_water = (SELECT max(seq) + 1 FROM outbox.events);
SELECT action, detail FROM outbox.rotate() WHERE partition = :'old_partition';
SELECT outbox.discard_dead(aggregatetype => 'dlq-old') AS discarded;
SELECT action, detail FROM outbox.rotate() WHERE partition = :'old_partition';
SELECT count(*) AS old_left FROM outbox.events WHERE aggregatetype = 'dlq-old';

UPDATE outbox.relay_state SET low_water = :saved_low_water;
DELETE FROM outbox.events WHERE aggregatetype = 'dlq';
DELETE FROM outbox.dead_letter_actions;
