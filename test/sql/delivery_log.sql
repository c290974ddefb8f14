-- The delivery log is asked one way: outbox._delivered_at(seq), a fresh index scan per call.
-- A GiST scan that a join rescans can mark live index entries dead (PostgreSQL's GiST, 15 to
-- 18; docs/design.md, "The delivery log"), hiding delivered events.
\set VERBOSITY terse
-- Events the relay (not running here) has not sent, three of them in one log row.
SELECT count(*) AS enqueued FROM (
  SELECT outbox.enqueue('log', 'k' || g, 'T', '{}') FROM generate_series(1, 5) g) e;
INSERT INTO outbox.deliveries (delivered_at, seqs)
SELECT '2026-01-02 03:04:05+00', range_agg(int8range(seq, seq, '[]'))
  FROM outbox.events WHERE aggregatetype = 'log' AND aggregateid IN ('k1', 'k2', 'k4');
SELECT aggregateid, outbox._delivered_at(seq) AS delivered_at
  FROM outbox.events WHERE aggregatetype = 'log' ORDER BY seq;
SELECT outbox._delivered_at(NULL) IS NULL AS null_seq_is_null;
SELECT aggregateid, state, published_at
  FROM outbox.event_status WHERE aggregatetype = 'log' ORDER BY seq;

-- No view reads outbox.deliveries itself: their plans never scan it (only the function does).
CREATE FUNCTION pg_temp.plan_reads_log(query text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_line text;
BEGIN
    FOR v_line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
        IF v_line LIKE '%deliveries%' THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END $$;
SELECT q AS query, pg_temp.plan_reads_log(q) AS scans_the_log
  FROM (VALUES ('SELECT * FROM outbox.event_status'), ('SELECT * FROM outbox.status'),
               ('SELECT * FROM outbox.database_metrics')) v(q);
-- ... and no function of the extension probes the log but the one (rotate() deletes from it).
SELECT p.proname
  FROM pg_proc p
 WHERE p.pronamespace = 'outbox'::regnamespace AND p.prosrc LIKE '%seqs%@>%'
 ORDER BY 1;

-- The trap itself, step by step. A reader that probed the log's GiST index inside a join
-- rescans one index scan, and PostgreSQL's rescan keeps the previous probe's dead items with
-- its leaf page; it then marks them dead on that page once the page's LSN equals the root's,
-- as it does right after the page split. The probes below find five rolled-back rows (dead)
-- before the row that committed; between two probes the leaf splits, and its items move. A
-- reader that rescans then marks five live entries dead, and their events look unpublished.
TRUNCATE outbox.deliveries;
SELECT count(*) AS enqueued FROM (
  SELECT outbox.enqueue('low', g::text, 'T', '{}') FROM generate_series(1, 400) g) e;
SELECT count(*) AS enqueued FROM (
  SELECT outbox.enqueue('probe', g::text, 'T', '{}') FROM generate_series(1, 2) g) e;
-- The index's first entries: five rows of a batch that rolled back, then its committed copy.
BEGIN;
INSERT INTO outbox.deliveries
SELECT now(), int8multirange(int8range(min(seq), min(seq), '[]'))
  FROM outbox.events, generate_series(1, 5) WHERE aggregatetype = 'probe' GROUP BY generate_series;
ROLLBACK;
INSERT INTO outbox.deliveries
SELECT now(), int8multirange(int8range(min(seq), max(seq), '[]')) FROM outbox.events WHERE aggregatetype = 'probe';
-- Rows for the 'low' events, one each in seq order, until the root page splits in two leaves
-- (the probe events' rows sort last: they go to the right one, first in it).
CREATE FUNCTION pg_temp.log_low_until_split() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_pages bigint := pg_relation_size('outbox.deliveries_seqs') / current_setting('block_size')::int;
    v_seq   bigint;
BEGIN
    FOR v_seq IN SELECT e.seq FROM outbox.events e
                  WHERE e.aggregatetype = 'low' AND outbox._delivered_at(e.seq) IS NULL ORDER BY e.seq LOOP
        INSERT INTO outbox.deliveries VALUES (now(), int8multirange(int8range(v_seq, v_seq, '[]')));
        IF pg_relation_size('outbox.deliveries_seqs') / current_setting('block_size')::int > v_pages THEN
            RETURN;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'no split';
END $$;
SELECT pg_temp.log_low_until_split();
SELECT pg_relation_size('outbox.deliveries_seqs') / current_setting('block_size')::int AS index_pages;
-- The index scans a log of real size gets (this one is small enough for a sequential scan).
SET enable_seqscan = off;
SET enable_bitmapscan = off;
BEGIN;
DECLARE probes CURSOR FOR
  SELECT aggregateid, state FROM outbox.event_status WHERE aggregatetype = 'probe';
FETCH 1 FROM probes;
-- More rows in the right leaf's range, until it splits.
SELECT pg_temp.log_low_until_split();
FETCH ALL FROM probes;
COMMIT;
-- Every row of the log is found through its index (still the only path allowed), and
-- event_status calls published exactly the events that a scan of the log's heap finds in it.
CREATE TEMP TABLE via_index AS SELECT count(*) AS n FROM outbox.deliveries WHERE seqs && '(,)'::int8range;
RESET enable_seqscan;
SET enable_indexscan = off;
SELECT (SELECT n FROM via_index) = count(*) AS the_index_finds_every_row FROM outbox.deliveries;
CREATE TEMP TABLE logged AS
SELECT e.id FROM outbox.events e
 WHERE e.aggregatetype IN ('low', 'probe') AND EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.seqs @> e.seq);
RESET enable_indexscan;
RESET enable_bitmapscan;
SELECT count(*) > 300 AS most_events_logged FROM logged;
SELECT count(*) AS published_not_logged FROM outbox.event_status s
 WHERE s.aggregatetype IN ('low', 'probe') AND s.state = 'published' AND s.id NOT IN (SELECT id FROM logged);
SELECT count(*) AS logged_not_published FROM logged l
 WHERE NOT EXISTS (SELECT 1 FROM outbox.event_status s WHERE s.id = l.id AND s.state = 'published');

-- Leave nothing for the later tests.
TRUNCATE outbox.deliveries;
DELETE FROM outbox.events WHERE aggregatetype IN ('log', 'low', 'probe');
