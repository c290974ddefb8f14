-- outbox.replay() and outbox.cancel_replay(): the error of each bad input, what a replay
-- records, and the partitions a running replay keeps from rotation. No relay runs here, so a
-- replay stays 'running' until cancelled.
\set VERBOSITY terse
SET outbox.partition_interval = '1s';
SET outbox.retention = '2s';
SET outbox.premake = 2;
SET outbox.drop_discards_events = on;
SET client_min_messages = error;
DROP EXTENSION outbox;
RESET client_min_messages;
CREATE EXTENSION outbox;

-- Published events of two keys, one still waiting, one dead letter; all in one partition
-- (written again if they straddled a boundary).
DO $$
BEGIN
  LOOP
    PERFORM outbox.enqueue('order', k, 'OrderCreated', '{}') FROM unnest('{a,a,b,waiting,dead}'::text[]) k;
    EXIT WHEN (SELECT count(DISTINCT tableoid) FROM outbox.events) = 1;
    DELETE FROM outbox.events;
  END LOOP;
END $$;
UPDATE outbox.events SET published_at = now() WHERE aggregateid IN ('a', 'b');
UPDATE outbox.events SET dead_at = now(), attempts = 5, last_error = 'refused' WHERE aggregateid = 'dead';
SELECT min(tableoid::regclass::text) AS partition, min(part_at) AS part_at FROM outbox.events \gset

-- Every bad input: its error, and no replay recorded.
SELECT regress.try($$SELECT outbox.replay(NULL, now())$$);
SELECT regress.try($$SELECT outbox.replay(now(), NULL)$$);
SELECT regress.try($$SELECT outbox.replay(now(), now() - interval '1 hour')$$);
SELECT regress.try($$SELECT outbox.replay('-infinity', '-infinity')$$);
SELECT regress.try($$SELECT outbox.replay('-infinity', now(), ids => '{}')$$);
SELECT regress.try($$SELECT outbox.cancel_replay(NULL)$$);
SELECT regress.try($$SELECT outbox.cancel_replay(12345)$$);
-- No NULL among the ids; no filter that can match nothing (an event's names are 1 to 255
-- characters), a megabyte one included.
SELECT regress.try($$SELECT outbox.replay('-infinity', now(), ids => '{NULL}')$$);
SELECT regress.try($$SELECT outbox.replay('-infinity', now(), ids => ARRAY[gen_random_uuid(), NULL])$$);
SELECT regress.try($$SELECT outbox.replay('-infinity', now(), aggregatetype => repeat('a', 1000000))$$);
SELECT regress.try($$SELECT outbox.replay('-infinity', now(), aggregateid => repeat('é', 256))$$);
SELECT regress.try($$SELECT outbox.replay('-infinity', now(), type => '')$$);
SELECT count(*) AS recorded FROM outbox.replays;

-- '-infinity': what is still there, on purpose. Its count leaves the dead letter out; the
-- waiting event counts (the relay is about to send it), and is replayed if the relay has sent
-- it when the worker gets there.
SELECT outbox.replay('-infinity', 'infinity') AS everything \gset
SELECT outbox.replay('-infinity', 'infinity', aggregateid => 'a') AS one_key \gset
SELECT outbox.replay('-infinity', 'infinity', aggregatetype => 'invoice') AS no_match \gset
SELECT id, state, events_total, events_sent, position, upto_seq = (SELECT max(seq) FROM outbox.events) AS upto_now,
       since = (SELECT min(lower_bound) FROM outbox.partitions) AS since_oldest,
       requested_by = session_user AS by_me
  FROM outbox.replays ORDER BY id;
-- Filters as given, and the ids.
SELECT outbox.replay(:'part_at', 'infinity', type => 'OrderCreated',
                     ids => ARRAY(SELECT id FROM outbox.events WHERE aggregateid = 'b')) AS by_id \gset
SELECT events_total FROM outbox.replays WHERE id = :by_id;

-- Cancelled once; a second time says it had ended.
SELECT outbox.cancel_replay(:one_key) AS cancelled, outbox.cancel_replay(:one_key) AS again;
SELECT outbox.cancel_replay(:no_match), outbox.cancel_replay(:by_id);
SELECT id, state, finished_at IS NOT NULL AS finished FROM outbox.replays ORDER BY id;

-- Rotation keeps a partition that a running replay reads, past retention, and drops it once
-- the replay has ended. (The waiting event and the dead letter would keep it too: they go.)
DELETE FROM outbox.events WHERE aggregateid IN ('waiting', 'dead');
SELECT regress.wait_until(format($$
  (SELECT upper_bound + current_setting('outbox.retention')::interval <= clock_timestamp()
     FROM outbox.partitions WHERE 'outbox.' || quote_ident(name) = %L)$$, :'partition')) AS past_retention;
SELECT action, detail FROM outbox.rotate() WHERE 'outbox.' || quote_ident(partition) = :'partition';
SELECT outbox.cancel_replay(:everything);
SELECT action, detail FROM outbox.rotate() WHERE 'outbox.' || quote_ident(partition) = :'partition';

-- Only the extension's owner may replay: nothing is granted to PUBLIC, not even to a role
-- that may use the schema.
CREATE ROLE replay_nobody;
GRANT USAGE ON SCHEMA outbox TO replay_nobody;
SET ROLE replay_nobody;
SELECT regress.try($$SELECT outbox.replay('-infinity', now())$$);
SELECT regress.try($$SELECT outbox.cancel_replay(1)$$);
SELECT regress.try($$SELECT count(*) FROM outbox.replays$$);
RESET ROLE;
REVOKE USAGE ON SCHEMA outbox FROM replay_nobody;
DROP ROLE replay_nobody;

-- A window that starts before the oldest partition, where rotation never dropped one:
-- accepted, as docs/operations.md's example on a fresh database (no event was ever there).
BEGIN;
DELETE FROM outbox.retained_since;
SELECT outbox.replay(now() - interval '1 day', now(), aggregatetype => 'order') > 0 AS accepted;
ROLLBACK;
-- Once rotation has dropped events: a window that starts before them is refused, not
-- replayed in part.
BEGIN;
INSERT INTO outbox.retained_since (since) VALUES (now() - interval '1 hour')
    ON CONFLICT (singleton) DO UPDATE SET since = EXCLUDED.since;
SELECT regress.try($$SELECT outbox.replay(now() - interval '1 day', now())$$);
SELECT outbox.replay(now() - interval '1 hour', now()) > 0 AS from_there_accepted;
ROLLBACK;
