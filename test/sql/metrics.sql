-- Metrics (docs/monitoring.md) without a preloaded library: the views answer, with zero
-- counters and the queue's gauges; a pg_monitor role reads them all, others none; the
-- Prometheus text has HELP and TYPE for every family.
\set VERBOSITY terse
CREATE ROLE metrics_watcher LOGIN IN ROLE pg_monitor;
CREATE ROLE metrics_outsider LOGIN;

SELECT count(outbox.enqueue('order', 'k' || i, 'created', '{}')) FROM generate_series(1, 3) i;

SET ROLE metrics_watcher;
SELECT datname = current_database() AS this_database, unpublished >= 3 AS unpublished,
       oldest_unpublished_age_seconds >= 0 AS age, dead_letters, partitions > 0 AS partitions,
       partitions_ahead_seconds > 0 AS ahead, relays_running, relays_wanted, worker_cap_reached,
       relay_starts_total, events_requeued_total
  FROM outbox.database_metrics;
SELECT count(*) FROM outbox.sink_metrics;
SELECT count(*) FROM outbox.histogram_metrics;
SELECT worker, state, up, events_sent_total, last_error_current, config_error
  FROM outbox.relay_metrics;
-- Every family has its HELP and TYPE line, and every sample line a value.
SELECT count(*) FILTER (WHERE line LIKE '# HELP %') = count(*) FILTER (WHERE line LIKE '# TYPE %')
         AS help_and_type,
       bool_and(line ~ '^(# (HELP|TYPE) outbox_[a-z_]+ .+|outbox_[a-z_]+\{.*\} [-+0-9.e]+)$')
         AS well_formed,
       count(*) FILTER (WHERE line LIKE 'outbox_unpublished{%') AS unpublished
  FROM regexp_split_to_table(rtrim(outbox.metrics(), E'\n'), E'\n') line;
RESET ROLE;

-- Running replays: how many, the events they have left, and the least recent progress (a done
-- one counts for nothing). Rows written by hand: no replay worker runs here.
INSERT INTO outbox.replays (since, until, upto_seq, events_total, events_sent, events_skipped,
                            requested_by, updated_at, state)
VALUES ('-infinity', now(), 10, 1000, 300, 100, 'tester', now() - interval '20 minutes', 'running'),
       ('-infinity', now(), 10, 50, 60, 0, 'tester', now(), 'running'),
       ('-infinity', now(), 10, 500, 0, 0, 'tester', now() - interval '1 day', 'done');
SET ROLE metrics_watcher;
SELECT replays_running, replay_events_remaining,
       replay_seconds_since_progress BETWEEN 1200 AND 1300 AS stalled_20_minutes
  FROM outbox.database_metrics;
SELECT line FROM regexp_split_to_table(outbox.metrics(), E'\n') line
 WHERE line ~ '^outbox_replay(s_running|_events_remaining)\{';
RESET ROLE;
DELETE FROM outbox.replays;
SELECT replays_running, replay_events_remaining, replay_seconds_since_progress
  FROM outbox.database_metrics;

-- A label's value is escaped as the text format wants.
SELECT outbox._label('datname', E'a"b\\c\nd');

SET ROLE metrics_outsider;
SELECT * FROM outbox.database_metrics;
SELECT outbox.metrics();
RESET ROLE;

DROP ROLE metrics_watcher;
DROP ROLE metrics_outsider;
DELETE FROM outbox.events;
