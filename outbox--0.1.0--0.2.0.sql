\echo Use "ALTER EXTENSION outbox UPDATE TO '0.2.0'" to load this file. \quit

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

-- 0.2.0: the relay marks events published with HOT updates.
--
-- Marking used to cost a new row version on a new page plus an index entry per event,
-- because published_at was in the partial index's predicate (a change to any indexed
-- column, predicates included, rules out a heap-only update). Now no index mentions
-- published_at, partitions keep free space on every page (outbox.partition_fillfactor), and
-- the relay finds its work from a low-water mark instead of the partial index: below the
-- mark every event is published or dead-lettered. The mark only passes a sequence value
-- once no transaction that could still commit an event at or below it is running (see
-- src/relay_worker.cpp, "The low-water mark").
--
-- CREATE EXTENSION outbox installs 0.1.0 and then runs this script, so every fresh install
-- takes this upgrade path too.

-- A sequence value is taken only after the transaction has its xid: that is what lets the
-- relay tell from a snapshot's xmin that nobody can still commit an event below a value.
-- nextval() in the column default ran before the INSERT assigned the xid.
CREATE FUNCTION outbox._next_seq(seq regclass)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_next_seq'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION outbox._next_seq(regclass) IS
  'nextval() after assigning the transaction id; the default of outbox.events.seq.';
REVOKE ALL ON FUNCTION outbox._next_seq(regclass) FROM PUBLIC;

-- A cached block of values would be handed out after the relay read the sequence.
ALTER SEQUENCE outbox.events_seq CACHE 1;
ALTER TABLE outbox.events ALTER COLUMN seq SET DEFAULT outbox._next_seq('outbox.events_seq'::pg_catalog.regclass);

-- The relay's progress: every event with seq < low_water is published or dead-lettered.
-- A floor: any value up to the true mark is correct, so it is saved now and then, not on
-- every batch. Not dumped: after a restore the relay starts from 0 once.
-- seq_filenode: the sequence's file when the mark was saved. ALTER SEQUENCE ... RESTART and
-- TRUNCATE ... RESTART IDENTITY give the sequence a new file: then the relay scans from 0.
CREATE TABLE outbox.relay_state (
    singleton    boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    low_water    bigint      NOT NULL DEFAULT 0,
    seq_filenode oid,
    updated_at   timestamptz NOT NULL DEFAULT pg_catalog.now()
);
INSERT INTO outbox.relay_state DEFAULT VALUES;
REVOKE ALL ON outbox.relay_state FROM PUBLIC;

-- Writers wait from here to the end of the update, and none is in flight: a writer takes
-- its lock before it takes a sequence value.
LOCK TABLE outbox.events IN SHARE MODE;

-- Delivery state that leaves the queue also leaves next_attempt_at, so that the retry index
-- below holds only the events waiting for a retry.
UPDATE outbox.events SET next_attempt_at = NULL
 WHERE next_attempt_at IS NOT NULL AND (published_at IS NOT NULL OR dead_at IS NOT NULL);

-- With no writer in flight, the first new unpublished event is a true low-water mark (read
-- with the old partial index): the relay starts there, not with a walk over the history.
UPDATE outbox.relay_state SET low_water = COALESCE(
    (SELECT pg_catalog.min(seq) FROM outbox.events
      WHERE published_at IS NULL AND dead_at IS NULL AND next_attempt_at IS NULL),
    (SELECT CASE WHEN is_called THEN last_value OPERATOR(pg_catalog.+) 1 ELSE last_value END
       FROM outbox.events_seq));

-- The indexes. No predicate mentions published_at, so marking an event is a heap-only
-- update when its page has room.
DROP INDEX outbox.events_unpublished;
-- New events, scanned from the low-water mark.
CREATE INDEX events_queue ON outbox.events (seq);
-- Events waiting for a retry after a rejection.
CREATE INDEX events_retry ON outbox.events (seq) WHERE next_attempt_at IS NOT NULL;
-- Dead letters.
CREATE INDEX events_dead ON outbox.events (seq) WHERE dead_at IS NOT NULL;

-- One more setting: the partitions' fillfactor.
DROP FUNCTION outbox._partition_settings();
CREATE FUNCTION outbox._partition_settings(
    OUT interval_seconds integer,
    OUT retention_seconds integer,
    OUT premake integer,
    OUT lock_timeout_ms integer,
    OUT fillfactor integer)
AS 'MODULE_PATHNAME', 'outbox_partition_settings'
LANGUAGE C STABLE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION outbox._partition_settings() FROM PUBLIC;

-- Partitions keep outbox.partition_fillfactor percent of each page for their rows and
-- leave the rest for the published versions of those rows.
CREATE OR REPLACE FUNCTION outbox._create_partition(p_lower timestamptz, p_upper timestamptz)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_name text := 'events_' || to_char(p_lower AT TIME ZONE 'UTC', 'YYYYMMDD"_"HH24MISS');
BEGIN
    EXECUTE format('CREATE TABLE outbox.%I (LIKE outbox.events INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION)'
                   ' WITH (fillfactor = %s)', v_name, (outbox._partition_settings()).fillfactor);
    EXECUTE format('ALTER TABLE outbox.events ATTACH PARTITION outbox.%I FOR VALUES FROM (%L) TO (%L)',
                   v_name, p_lower, p_upper);
    INSERT INTO outbox.partitions (name, lower_bound, upper_bound) VALUES (v_name, p_lower, p_upper);
    RETURN v_name;
END
$$;
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT q.name FROM outbox.partitions q
              WHERE pg_catalog.to_regclass(pg_catalog.format('outbox.%I', q.name)) IS NOT NULL
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE outbox.%I SET (fillfactor = %s)', r.name,
                                  (outbox._partition_settings()).fillfactor);
        EXECUTE pg_catalog.format('ALTER TABLE outbox.%I ALTER COLUMN seq SET DEFAULT outbox._next_seq(%L::pg_catalog.regclass)',
                                  r.name, 'outbox.events_seq');
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION outbox.rotate()
RETURNS TABLE (action text, partition text, lower_bound timestamptz, upper_bound timestamptz, detail text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    s          record;
    v_now      timestamptz := clock_timestamp();
    v_step     interval;
    v_cutoff   timestamptz;
    v_newest   timestamptz;
    v_lower    timestamptz;
    v_upper    timestamptz;
    v_next     timestamptz;
    v_target   timestamptz;
    v_current  timestamptz;
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
    v_step    := make_interval(secs => s.interval_seconds);
    v_current := outbox._bucket_start(v_now, s.interval_seconds);
    v_target  := v_current + v_step * (s.premake + 1);

    -- Forget partitions that were dropped or detached by hand.
    DELETE FROM outbox.partitions q
     WHERE NOT EXISTS (SELECT 1 FROM pg_inherits i
                        WHERE i.inhparent = 'outbox.events'::regclass
                          AND i.inhrelid = to_regclass(format('outbox.%I', q.name)));

    SELECT max(q.upper_bound) INTO v_newest FROM outbox.partitions q;

    -- Create: coverage from now up to premake intervals ahead, contiguous with the past.
    v_lower := v_current;
    IF v_newest IS NOT NULL THEN
        IF v_newest <= v_now THEN
            -- The clock passed the newest partition: enqueue routed recent events into it.
            UPDATE outbox.partitions SET may_hold_late_rows = true WHERE upper_bound = v_newest;
        END IF;
        IF v_newest < v_current THEN
            -- Rotation fell behind: one partition covers the whole gap, so that coverage
            -- stays contiguous.
            partition := outbox._create_partition(v_newest, v_current);
            RETURN QUERY SELECT 'created', partition, v_newest, v_current, 'covers the time rotation did not run'::text;
        END IF;
    END IF;
    -- From the current interval on, fill every range that no partition covers (normally
    -- just the ones past the newest; also holes left by a partition dropped by hand).
    LOOP
        EXIT WHEN v_lower >= v_target;
        SELECT q.upper_bound INTO v_upper FROM outbox.partitions q
         WHERE q.lower_bound <= v_lower AND v_lower < q.upper_bound;
        IF FOUND THEN
            v_lower := v_upper;
            CONTINUE;
        END IF;
        SELECT min(q.lower_bound) INTO v_next FROM outbox.partitions q WHERE q.lower_bound > v_lower;
        v_upper := least(outbox._bucket_start(v_lower, s.interval_seconds) + v_step,
                         coalesce(v_next, 'infinity'));
        partition := outbox._create_partition(v_lower, v_upper);
        RETURN QUERY SELECT 'created', partition, v_lower, v_upper, NULL::text;
        v_lower := v_upper;
    END LOOP;

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
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM outbox.%1$I WHERE seq >= $1 AND published_at IS NULL)'
                       ' OR EXISTS (SELECT 1 FROM outbox.%1$I WHERE next_attempt_at IS NOT NULL AND published_at IS NULL)'
                       ' OR EXISTS (SELECT 1 FROM outbox.%1$I WHERE dead_at IS NOT NULL AND published_at IS NULL)', p.name)
           INTO STRICT v_busy USING coalesce(v_low_water, 0);
        IF v_busy THEN
            RAISE WARNING 'outbox.rotate: a partition past retention holds unpublished events; not dropped'
                USING DETAIL = format('Partition outbox.%I, from %s to %s.', p.name, p.lower_bound, p.upper_bound),
                      HINT = 'The relay has not published them yet (see outbox.events WHERE published_at IS NULL); the partition is dropped once they are.';
            RETURN QUERY SELECT 'kept', p.name, p.lower_bound, p.upper_bound, 'holds unpublished events'::text;
            CONTINUE;
        END IF;
        EXECUTE format('DROP TABLE outbox.%I', p.name);
        DELETE FROM outbox.partitions q WHERE q.name = p.name;
        RETURN QUERY SELECT 'dropped', p.name, p.lower_bound, p.upper_bound, NULL::text;
    END LOOP;
END
$$;

-- The lag counts the new events above the low-water mark and those waiting for a retry:
-- index ranges, not a scan of the history.
CREATE OR REPLACE VIEW outbox.status AS
SELECT w.worker, w.pid, w.state, w.sink, w.batches, w.events_sent, w.events_failed,
       w.events_dead, w.last_error, w.last_error_at, w.last_success_at, w.backoff_until,
       q.unpublished, q.oldest_unpublished_age, d.dead_lettered
  FROM (SELECT pg_catalog.count(*) AS unpublished,
               pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(e.created_at)
                 AS oldest_unpublished_age
          FROM outbox.events e
         WHERE (e.seq OPERATOR(pg_catalog.>=)
                  COALESCE((SELECT r.low_water FROM outbox.relay_state r), 0::pg_catalog.int8)
                OR e.next_attempt_at IS NOT NULL)
           AND e.published_at IS NULL AND e.dead_at IS NULL) q
 CROSS JOIN (SELECT pg_catalog.count(*) AS dead_lettered FROM outbox.events e
              WHERE e.dead_at IS NOT NULL AND e.published_at IS NULL) d
  LEFT JOIN outbox._workers() w ON true;

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
       SET seq = outbox._next_seq('outbox.events_seq'), dead_at = NULL, attempts = 0,
           next_attempt_at = NULL
     WHERE id = event_id AND published_at IS NULL;
    v_found := FOUND;
    PERFORM outbox._notify_relay();
    RETURN v_found;
END
$$;

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
       SET seq = outbox._next_seq('outbox.events_seq'), dead_at = NULL, attempts = 0,
           next_attempt_at = NULL
     WHERE published_at IS NULL AND dead_at IS NOT NULL;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    PERFORM outbox._notify_relay();
    RETURN v_count;
END
$$;
