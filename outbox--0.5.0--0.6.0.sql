\echo Use "ALTER EXTENSION outbox UPDATE TO '0.6.0'" to load this file. \quit

-- outbox 0.5.0 -> 0.6.0: the delivery log (the relay no longer updates an event it
-- delivers; rows 0.5.0 marked keep their published_at, so nothing is sent again);
-- outbox.status shows the held keys; requeue() and requeue_dead() call outbox._next_seq
-- with a typed argument (no overload planted in the schema can catch the call);
-- outbox.version() says which library the server loaded.


-- Refuse a schema that anyone but a superuser controls. A role that owns it, may create in
-- it, or owns an object in it could plant functions and operators that this script would
-- run with superuser rights (the CVE-2022-2625 / CVE-2023-39417 class). Every install and
-- update script starts with this same block; everything after it names pg_catalog objects
-- explicitly, and function bodies pin search_path.
DO $guard$
DECLARE
    v_problem text;
BEGIN
    SELECT p.problem INTO v_problem FROM (
        SELECT pg_catalog.format('the schema is owned by %I, which is not a superuser', r.rolname) AS problem
          FROM pg_catalog.pg_namespace n
          JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
         WHERE n.nspname OPERATOR(pg_catalog.=) 'outbox' AND NOT r.rolsuper
        UNION ALL
        SELECT pg_catalog.format('%s may create objects in the schema',
                                 COALESCE(pg_catalog.quote_ident(r.rolname), 'PUBLIC'))
          FROM pg_catalog.pg_namespace n
         CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a
          LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
         WHERE n.nspname OPERATOR(pg_catalog.=) 'outbox'
           AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE' AND r.rolsuper IS NOT TRUE
        UNION ALL
        SELECT pg_catalog.format('%s "%s" in the schema is owned by %I, which is not a superuser',
                                 o.kind, o.name, r.rolname)
          FROM pg_catalog.pg_namespace n
         CROSS JOIN LATERAL (
                SELECT 'relation', c.relname::pg_catalog.text, c.relowner FROM pg_catalog.pg_class c
                 WHERE c.relnamespace OPERATOR(pg_catalog.=) n.oid
                UNION ALL SELECT 'function', f.proname::pg_catalog.text, f.proowner FROM pg_catalog.pg_proc f
                 WHERE f.pronamespace OPERATOR(pg_catalog.=) n.oid
                UNION ALL SELECT 'type', t.typname::pg_catalog.text, t.typowner FROM pg_catalog.pg_type t
                 WHERE t.typnamespace OPERATOR(pg_catalog.=) n.oid
                UNION ALL SELECT 'operator', o.oprname::pg_catalog.text, o.oprowner FROM pg_catalog.pg_operator o
                 WHERE o.oprnamespace OPERATOR(pg_catalog.=) n.oid
                UNION ALL SELECT 'collation', c.collname::pg_catalog.text, c.collowner FROM pg_catalog.pg_collation c
                 WHERE c.collnamespace OPERATOR(pg_catalog.=) n.oid
                UNION ALL SELECT 'conversion', c.conname::pg_catalog.text, c.conowner FROM pg_catalog.pg_conversion c
                 WHERE c.connamespace OPERATOR(pg_catalog.=) n.oid
                UNION ALL SELECT 'operator class', c.opcname::pg_catalog.text, c.opcowner FROM pg_catalog.pg_opclass c
                 WHERE c.opcnamespace OPERATOR(pg_catalog.=) n.oid
                UNION ALL SELECT 'operator family', f.opfname::pg_catalog.text, f.opfowner FROM pg_catalog.pg_opfamily f
                 WHERE f.opfnamespace OPERATOR(pg_catalog.=) n.oid
                UNION ALL SELECT 'text search configuration', c.cfgname::pg_catalog.text, c.cfgowner
                  FROM pg_catalog.pg_ts_config c WHERE c.cfgnamespace OPERATOR(pg_catalog.=) n.oid
                UNION ALL SELECT 'text search dictionary', d.dictname::pg_catalog.text, d.dictowner
                  FROM pg_catalog.pg_ts_dict d WHERE d.dictnamespace OPERATOR(pg_catalog.=) n.oid
                UNION ALL SELECT 'statistics object', s.stxname::pg_catalog.text, s.stxowner
                  FROM pg_catalog.pg_statistic_ext s WHERE s.stxnamespace OPERATOR(pg_catalog.=) n.oid
                UNION ALL SELECT 'extension', e.extname::pg_catalog.text, e.extowner FROM pg_catalog.pg_extension e
                 WHERE e.extnamespace OPERATOR(pg_catalog.=) n.oid
                   AND e.extname OPERATOR(pg_catalog.<>) 'outbox') o(kind, name, owner)
          JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) o.owner
         WHERE n.nspname OPERATOR(pg_catalog.=) 'outbox' AND NOT r.rolsuper
    ) p LIMIT 1;
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'outbox: schema "outbox" is not safe to install into: %', v_problem
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'Its objects could run with superuser rights while the extension is installed or updated.',
                  HINT = 'CREATE EXTENSION outbox makes the schema itself: drop a schema "outbox" that someone else made. An existing installation must have its schema and every object in it owned by superusers, and no other role may hold CREATE on it.';
    END IF;
END
$guard$;

-- The delivery log (docs/design.md, "The delivery log"): one row per batch the relay
-- committed, with the seq of every event the sink acknowledged in it, as ranges (a batch of
-- one worker is mostly one range). Insert-only: a delivery writes no event row, so it
-- leaves no dead tuple and little WAL. An event is published when its published_at is set
-- (0.5.0's relay, and retries) or its seq is here. rotate() deletes the rows below the
-- oldest event left. Dumped with the events.
CREATE TABLE outbox.deliveries (
    delivered_at pg_catalog.timestamptz     NOT NULL,
    seqs         pg_catalog.int8multirange NOT NULL
);
-- With several workers a batch's seqs interleave with the other workers' (hundreds of ranges,
-- kilobytes): stored out of line uncompressed, as compressing them cost a worker more CPU
-- than the rest of its batch's bookkeeping (bench/relay/README.md, "Parallel workers").
ALTER TABLE outbox.deliveries ALTER COLUMN seqs SET STORAGE EXTERNAL;
CREATE INDEX deliveries_seqs ON outbox.deliveries USING gist (seqs);
SELECT pg_catalog.pg_extension_config_dump('outbox.deliveries'::pg_catalog.regclass, '');
REVOKE ALL ON outbox.deliveries FROM PUBLIC;

-- The indexes on seq and id take keys in increasing order: their pages are filled to 100 %,
-- so a page split moves almost nothing to the new page (about 4 bytes of WAL less per
-- event). New partitions get it here; the existing ones from their next split on.
CREATE OR REPLACE FUNCTION outbox._create_partition_indexes(p_name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    EXECUTE format('CREATE INDEX %I ON outbox.%I (seq) WITH (fillfactor = 100)', p_name || '_queue', p_name);
    EXECUTE format('CREATE INDEX %I ON outbox.%I (seq) WHERE next_attempt_at IS NOT NULL', p_name || '_retry', p_name);
    EXECUTE format('CREATE INDEX %I ON outbox.%I (seq) WHERE dead_at IS NOT NULL', p_name || '_dead', p_name);
    EXECUTE format('CREATE INDEX %I ON outbox.%I (id) WITH (fillfactor = 100)', p_name || '_id', p_name);
END
$$;

DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT c.relname FROM pg_catalog.pg_inherits i
               JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid
              WHERE i.inhparent OPERATOR(pg_catalog.=) 'outbox.events'::pg_catalog.regclass
              ORDER BY c.relname
    LOOP
        EXECUTE pg_catalog.format('ALTER INDEX IF EXISTS outbox.%I SET (fillfactor = 100)', r.relname::pg_catalog.text OPERATOR(pg_catalog.||) '_queue');
        EXECUTE pg_catalog.format('ALTER INDEX IF EXISTS outbox.%I SET (fillfactor = 100)', r.relname::pg_catalog.text OPERATOR(pg_catalog.||) '_id');
    END LOOP;
END
$$;

-- rotate() reads the delivery log, and trims it.
CREATE OR REPLACE FUNCTION outbox.rotate()
RETURNS TABLE (action text, partition text, lower_bound timestamptz, upper_bound timestamptz, detail text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    s          record;
    c          record;
    v_now      timestamptz := clock_timestamp();
    v_cutoff   timestamptz;
    v_newest   timestamptz;
    v_created  text[] := '{}';
    v_busy     boolean;
    v_low_water bigint;
    v_candidates text[] := '{}';
    v_old_timeout text;
    p          record;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        -- After the lock below, rotation must see every committed event; an older
        -- snapshot could miss unpublished rows and drop them.
        RAISE EXCEPTION 'outbox.rotate() must run at READ COMMITTED isolation'
            USING ERRCODE = 'active_sql_transaction',
                  HINT = 'Call it on its own, as pg_cron does.';
    END IF;
    -- One rotation at a time; a second one returns at once.
    IF NOT pg_try_advisory_xact_lock(hashtext('outbox.rotate')) THEN
        RAISE NOTICE 'outbox.rotate: another rotation is running; nothing done';
        RETURN;
    END IF;

    SELECT * INTO s FROM outbox._partition_settings();
    FOR c IN SELECT * FROM outbox._create_partitions(v_now) LOOP
        v_created := v_created || c.partition;
        action := c.action;
        partition := c.partition;
        lower_bound := c.lower_bound;
        upper_bound := c.upper_bound;
        detail := c.detail;
        RETURN NEXT;
    END LOOP;
    -- The newest partition as it stood when this rotation started.
    SELECT max(q.upper_bound) INTO v_newest FROM outbox.partitions q WHERE q.name <> ALL (v_created);

    -- Drop: partitions whose whole range is past retention. Never the newest one as it
    -- stood when this rotation started: a writer may still be routing into it.
    IF s.retention_seconds = 0 THEN
        RETURN;
    END IF;
    v_cutoff := v_now - make_interval(secs => s.retention_seconds);

    -- First, without any lock: a partition that took events while rotation was behind is
    -- kept until those events are past retention too. This may read the whole partition,
    -- so it must not happen while writers wait on our lock. No event is routed into it any
    -- more: newer partitions exist since the run that marked it.
    FOR p IN SELECT q.* FROM outbox.partitions q
              WHERE q.upper_bound <= v_cutoff
                AND (v_newest IS NULL OR q.upper_bound < v_newest)
              ORDER BY q.lower_bound
    LOOP
        IF p.may_hold_late_rows THEN
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM outbox.%I WHERE created_at > %L)', p.name, v_cutoff)
               INTO STRICT v_busy;
            IF v_busy THEN
                RETURN QUERY SELECT 'kept', p.name, p.lower_bound, p.upper_bound,
                                    'holds events written while rotation was behind; kept for their retention'::text;
                CONTINUE;
            END IF;
        END IF;
        v_candidates := v_candidates || p.name;
    END LOOP;
    IF cardinality(v_candidates) = 0 THEN
        RETURN;
    END IF;

    -- Dropping a partition takes ACCESS EXCLUSIVE on outbox.events. Waiting for it would
    -- queue every writer behind us, so wait only briefly (as PgQ does).
    -- outbox.rotate_lock_timeout = 0 means NOWAIT: never queue at all.
    v_old_timeout := current_setting('lock_timeout');
    PERFORM set_config('lock_timeout', s.lock_timeout_ms || 'ms', true);
    BEGIN
        IF s.lock_timeout_ms = 0 THEN
            LOCK TABLE outbox.events IN ACCESS EXCLUSIVE MODE NOWAIT;
        ELSE
            LOCK TABLE outbox.events IN ACCESS EXCLUSIVE MODE;
        END IF;
    EXCEPTION WHEN lock_not_available THEN
        PERFORM set_config('lock_timeout', v_old_timeout, true);
        RAISE NOTICE 'outbox.rotate: outbox.events is busy; dropping old partitions is left for the next run'
            USING DETAIL = format('The lock was not granted within %s ms.', s.lock_timeout_ms);
        RETURN QUERY
            SELECT 'skipped', q.name, q.lower_bound, q.upper_bound, 'lock not granted in time'::text
              FROM outbox.partitions q WHERE q.name = ANY (v_candidates) ORDER BY q.lower_bound;
        RETURN;
    END;
    PERFORM set_config('lock_timeout', v_old_timeout, true);

    -- With the lock held no writer is in flight, and each statement's snapshot sees every
    -- committed event: the unpublished check cannot miss one. Below the relay's low-water
    -- mark every event is published or dead-lettered, so it reads only the index entries
    -- above the mark, the retries and the dead letters (three index probes).
    SELECT r.low_water INTO v_low_water FROM outbox.relay_state r;
    FOR p IN SELECT q.* FROM outbox.partitions q WHERE q.name = ANY (v_candidates) ORDER BY q.lower_bound
    LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM outbox.%1$I e WHERE seq >= $1 AND published_at IS NULL'
                       '                 AND NOT EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.seqs @> e.seq))'
                       ' OR EXISTS (SELECT 1 FROM outbox.%1$I WHERE next_attempt_at IS NOT NULL AND published_at IS NULL)'
                       ' OR EXISTS (SELECT 1 FROM outbox.%1$I WHERE dead_at IS NOT NULL AND published_at IS NULL)', p.name)
           INTO STRICT v_busy USING coalesce(v_low_water, 0);
        IF v_busy THEN
            RAISE WARNING 'outbox.rotate: a partition past retention holds unpublished events; not dropped'
                USING DETAIL = format('Partition outbox.%I, from %s to %s.', p.name, p.lower_bound, p.upper_bound),
                      HINT = 'The relay has not published them yet (see outbox.event_status WHERE state <> ''published''); the partition is dropped once they are.';
            RETURN QUERY SELECT 'kept', p.name, p.lower_bound, p.upper_bound, 'holds unpublished events'::text;
            CONTINUE;
        END IF;
        EXECUTE format('DROP TABLE outbox.%I', p.name);
        DELETE FROM outbox.partitions q WHERE q.name = p.name;
        RETURN QUERY SELECT 'dropped', p.name, p.lower_bound, p.upper_bound, NULL::text;
    END LOOP;
    -- The delivery log's rows below the oldest event left name only events that are gone.
    DELETE FROM outbox.deliveries d
     WHERE d.seqs << int8range(coalesce((SELECT min(e.seq) FROM outbox.events e), 9223372036854775807), NULL);
END
$$;

-- A requeued event takes a new sequence number: it goes to the end of the queue, above the
-- relay's low-water mark, as a new event would.
CREATE OR REPLACE FUNCTION outbox.requeue(event_id uuid)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_found boolean;
BEGIN
    UPDATE outbox.events
       SET seq = outbox._next_seq('outbox.events_seq'::pg_catalog.regclass), dead_at = NULL, attempts = 0,
           next_attempt_at = NULL
     WHERE id = event_id AND published_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.seqs @> events.seq);
    v_found := FOUND;
    PERFORM outbox._notify_relay();
    RETURN v_found;
END
$$;
COMMENT ON FUNCTION outbox.requeue(uuid) IS
  'Sends a dead-lettered (or waiting) event again: clears dead_at, attempts and the retry time.';

CREATE OR REPLACE FUNCTION outbox.requeue_dead()
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count bigint;
BEGIN
    UPDATE outbox.events
       SET seq = outbox._next_seq('outbox.events_seq'::pg_catalog.regclass), dead_at = NULL, attempts = 0,
           next_attempt_at = NULL
     WHERE published_at IS NULL AND dead_at IS NOT NULL;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    PERFORM outbox._notify_relay();
    RETURN v_count;
END
$$;
COMMENT ON FUNCTION outbox.requeue_dead() IS 'Requeues every dead-lettered event.';

-- The version of the library the server loaded (outbox.so), beside the installed SQL's
-- (pg_extension.extversion): after a package upgrade they differ until ALTER EXTENSION outbox
-- UPDATE has run and, for the preloaded library, the server has restarted.
CREATE FUNCTION outbox.version()
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'outbox_version'
LANGUAGE C STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION outbox.version() IS
  'The version of the loaded outbox library; pg_extension.extversion is the installed SQL''s.';

REVOKE ALL ON FUNCTION outbox.version() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox.version() TO pg_monitor;

-- What an operator watches. The lag is what is still unpublished and how old it is, not
-- max(id) - last_id (which reads zero while events are being lost). It reads index ranges
-- above the relay's low-water mark and the retries: it costs what the backlog costs. A held
-- key is one whose earliest unresolved event waits for a retry (a rejection, or a transient
-- failure while other keys were delivered); its later events wait behind it.
CREATE OR REPLACE VIEW outbox.status AS
SELECT w.worker, w.pid, w.state, w.sink, w.batches, w.events_sent, w.events_failed,
       w.events_dead, w.last_error, w.last_error_at, w.last_success_at, w.backoff_until,
       q.unpublished, q.oldest_unpublished_age, d.dead_lettered, w.database, w.detail,
       w.shards, h.held_keys, o.oldest_held_key, o.oldest_held_error, o.oldest_held_age
  FROM (SELECT pg_catalog.count(*) AS unpublished,
               pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(e.created_at)
                 AS oldest_unpublished_age
          FROM outbox.events e
         WHERE (e.seq OPERATOR(pg_catalog.>=)
                  COALESCE((SELECT r.low_water FROM outbox.relay_state r), 0::pg_catalog.int8)
                OR e.next_attempt_at IS NOT NULL)
           AND e.published_at IS NULL AND e.dead_at IS NULL
           AND NOT EXISTS (SELECT 1 FROM outbox.deliveries d
                            WHERE d.seqs OPERATOR(pg_catalog.@>) e.seq)) q
 CROSS JOIN (SELECT pg_catalog.count(*) AS dead_lettered FROM outbox.events e
              WHERE e.dead_at IS NOT NULL AND e.published_at IS NULL) d
 CROSS JOIN (SELECT pg_catalog.count(DISTINCT (e.aggregatetype, e.aggregateid)) AS held_keys
               FROM outbox.events e
              WHERE e.next_attempt_at IS NOT NULL AND e.published_at IS NULL
                AND e.dead_at IS NULL) h
  LEFT JOIN (SELECT pg_catalog.format('%s/%s', e.aggregatetype, e.aggregateid) AS oldest_held_key,
                    e.last_error AS oldest_held_error,
                    pg_catalog.now() OPERATOR(pg_catalog.-) e.created_at AS oldest_held_age
               FROM outbox.events e
              WHERE e.next_attempt_at IS NOT NULL AND e.published_at IS NULL
                AND e.dead_at IS NULL
              ORDER BY e.seq LIMIT 1) o ON true
  LEFT JOIN outbox._workers() w ON true;
COMMENT ON VIEW outbox.status IS
  'One row per relay worker (running or not, and why), with the queue''s lag: unpublished events and the age of the oldest, and the keys held behind a retrying event.';

-- Each event's delivery, as the relay's state says it: the one place to ask whether an event
-- was published, and when. Published: marked on the row (0.5.0's relay, and retries), or in
-- the delivery log (one GiST probe per event that is neither). Exact as of the last batch
-- the relay committed.
CREATE VIEW outbox.event_status AS
SELECT e.id, e.seq, e.aggregatetype, e.aggregateid, e.type, e.payload, e.headers, e.created_at,
       CASE WHEN e.published_at IS NOT NULL OR l.delivered_at IS NOT NULL THEN 'published'
            WHEN e.dead_at IS NOT NULL THEN 'dead'
            WHEN e.next_attempt_at IS NOT NULL THEN 'retrying'
            ELSE 'pending' END AS state,
       COALESCE(e.published_at, l.delivered_at) AS published_at, e.attempts, e.last_error,
       e.next_attempt_at, e.dead_at
  FROM outbox.events e
  LEFT JOIN LATERAL (
        SELECT d.delivered_at FROM outbox.deliveries d
         WHERE e.published_at IS NULL AND e.dead_at IS NULL AND e.next_attempt_at IS NULL
           AND d.seqs OPERATOR(pg_catalog.@>) e.seq
         LIMIT 1) l ON true;
COMMENT ON VIEW outbox.event_status IS
  'Every event with its delivery state: pending, retrying (itself, or behind an earlier event of its key), dead, or published (and when).';

-- As the install script leaves every table and view: no privilege but the owner's.
REVOKE ALL ON outbox.event_status FROM PUBLIC;

-- Every database's relays, from shared memory, for a monitoring role connected to any
-- database that has the extension: outbox._workers()'s columns, for every database.
CREATE FUNCTION outbox._cluster_workers(
    OUT worker int, OUT pid int, OUT state text, OUT sink text,
    OUT batches bigint, OUT events_sent bigint, OUT events_failed bigint,
    OUT events_dead bigint, OUT last_error text, OUT last_error_at timestamptz,
    OUT last_success_at timestamptz, OUT backoff_until timestamptz,
    OUT database text, OUT detail text, OUT shards int)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'outbox_cluster_workers'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION outbox._cluster_workers() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox._cluster_workers() TO pg_monitor;

CREATE VIEW outbox.cluster_status AS
SELECT w.database, w.worker, w.pid, w.state, w.sink, w.batches, w.events_sent, w.events_failed,
       w.events_dead, w.last_error, w.last_error_at, w.last_success_at, w.backoff_until,
       w.detail, w.shards
  FROM outbox._cluster_workers() w;
COMMENT ON VIEW outbox.cluster_status IS
  'One row per relay worker of every database of the cluster (running or not, and why); the queue''s lag is in each database''s outbox.status.';
REVOKE ALL ON outbox.cluster_status FROM PUBLIC;
GRANT SELECT ON outbox.cluster_status TO pg_monitor;

-- outbox.database is empty by default now: relays in every database with the extension.
-- Checks and stores the sink configuration; the relay picks it up at commit: no restart.
CREATE OR REPLACE FUNCTION outbox.configure_sink(sink text, options jsonb DEFAULT '{}')
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_description text;
BEGIN
    IF sink IS NULL OR options IS NULL THEN
        RAISE EXCEPTION 'outbox.configure_sink: sink and options must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_description := outbox._check_sink(sink, options);
    INSERT INTO outbox.sink_config AS c (sink, options)
    VALUES (sink, options)
    ON CONFLICT (singleton) DO UPDATE
       SET sink = excluded.sink, options = excluded.options, updated_at = now();
    PERFORM outbox._notify_relay();
    IF current_setting('outbox.database', true) IS NULL THEN
        RAISE NOTICE 'outbox is not in shared_preload_libraries: no relay runs on this server';
    ELSIF current_setting('outbox.database') NOT IN ('', current_database()) THEN
        RAISE NOTICE 'outbox.database restricts the relay to database "%": no relay runs in this one',
            current_setting('outbox.database')
            USING HINT = 'Empty outbox.database (relays in every database that has the extension) and restart, or configure the sink in that database.';
    END IF;
    RETURN v_description;
END
$$;
