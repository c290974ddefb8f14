\echo Use "CREATE EXTENSION outbox" to load this file. \quit

-- outbox 0.7.0, the whole install in one script. Older installations reach the same state
-- through outbox--0.1.0.sql and the update scripts.
--
-- Security (see docs/security.md): the script first checks the schema (below); every
-- statement that runs here names the pg_catalog functions, operators and types it uses; and
-- every function whose body runs SQL pins search_path = pg_catalog, pg_temp, except enqueue
-- and enqueue_batch (see their comment).

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

-- Insert order. A transaction takes its xid before its sequence value (outbox._next_seq), and
-- the sequence caches nothing: the relay's low-water mark relies on both (docs/design.md).
-- Dumped by pg_dump (its value), so that restored events and new ones never share a seq.
CREATE SEQUENCE outbox.events_seq CACHE 1;
SELECT pg_catalog.pg_extension_config_dump('outbox.events_seq'::pg_catalog.regclass, '');

-- nextval() after assigning the transaction id; the default of outbox.events.seq.
CREATE FUNCTION outbox._next_seq(seq pg_catalog.regclass)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'outbox_next_seq'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION outbox._next_seq(pg_catalog.regclass) IS
  'nextval() after assigning the transaction id; the default of outbox.events.seq.';

-- The events table: Debezium's outbox shape (id, aggregatetype, aggregateid, type, payload)
-- plus headers, timestamps and delivery state. Fixed-width columns first, so the row has no
-- alignment padding.
CREATE TABLE outbox.events (
    seq             pg_catalog.int8        NOT NULL
                    DEFAULT outbox._next_seq('outbox.events_seq'::pg_catalog.regclass),
    created_at      pg_catalog.timestamptz NOT NULL,
    -- Partition key: equals created_at, except when outbox.rotate() fell behind and the
    -- event went to the last instant of the newest partition.
    part_at         pg_catalog.timestamptz NOT NULL,
    published_at    pg_catalog.timestamptz,
    next_attempt_at pg_catalog.timestamptz,
    dead_at         pg_catalog.timestamptz,
    attempts        pg_catalog.int4        NOT NULL DEFAULT 0,
    id              pg_catalog.uuid        NOT NULL,
    aggregatetype   pg_catalog.varchar(255) NOT NULL,
    aggregateid     pg_catalog.varchar(255) NOT NULL,
    type            pg_catalog.varchar(255) NOT NULL,
    payload         pg_catalog.jsonb       NOT NULL,
    headers         pg_catalog.jsonb,
    last_error      pg_catalog.text,
    -- A dead letter given up (outbox.discard_dead()): kept until rotation, never sent.
    discarded_at    pg_catalog.timestamptz
) PARTITION BY RANGE (part_at);
ALTER SEQUENCE outbox.events_seq OWNED BY outbox.events.seq;
COMMENT ON TABLE outbox.events IS
  'Outbox events, partitioned by time. Write with outbox.enqueue(); rotate with outbox.rotate().';

-- The indexes are each partition's own, made with it (outbox._create_partition), not
-- partitioned indexes of outbox.events: pg_dump dumps a partition with its own indexes, and
-- a restore attaching a partition to a table with partitioned indexes would make them a
-- second time.

-- Partitions made by outbox.rotate(). may_hold_late_rows marks a partition that was the
-- newest while the clock had passed its end: it may hold recent events routed there, so
-- rotation checks their created_at before dropping it.
CREATE TABLE outbox.partitions (
    name               pg_catalog.text        PRIMARY KEY,
    lower_bound        pg_catalog.timestamptz NOT NULL,
    upper_bound        pg_catalog.timestamptz NOT NULL,
    may_hold_late_rows pg_catalog.bool        NOT NULL DEFAULT false,
    created_at         pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CHECK (lower_bound OPERATOR(pg_catalog.<) upper_bound)
);
SELECT pg_catalog.pg_extension_config_dump('outbox.partitions'::pg_catalog.regclass, '');

-- The relay's progress: every event with seq < low_water is published or dead-lettered.
-- A floor: any value up to the true mark is correct, so it is saved now and then. Not
-- dumped: after a restore the relay starts from 0 once. seq_filenode: the sequence's file
-- when the mark was saved (ALTER SEQUENCE ... RESTART gives it a new one: scan from 0).
CREATE TABLE outbox.relay_state (
    singleton    pg_catalog.bool        PRIMARY KEY DEFAULT true CHECK (singleton),
    low_water    pg_catalog.int8        NOT NULL DEFAULT 0,
    seq_filenode pg_catalog.oid,
    updated_at   pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now()
);
INSERT INTO outbox.relay_state DEFAULT VALUES;

-- Since when outbox.events holds every event it was given: the upper bound of the newest
-- partition rotation has dropped (no row: it has dropped none). replay() refuses only a
-- window that starts before it. Dumped: a restore keeps what was lost before it.
CREATE TABLE outbox.retained_since (
    singleton pg_catalog.bool        PRIMARY KEY DEFAULT true CHECK (singleton),
    since     pg_catalog.timestamptz NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('outbox.retained_since'::pg_catalog.regclass, '');
REVOKE ALL ON outbox.retained_since FROM PUBLIC;

-- Per-key order with several relay workers (docs/design.md, "Order"): keys hash to 64
-- shards, each sent by one worker at a time. Inlined into the relay's queries (no SET
-- clause; it names only pg_catalog objects).
CREATE FUNCTION outbox.shard_of(aggregatetype pg_catalog.text, aggregateid pg_catalog.text)
RETURNS pg_catalog.int4
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (pg_catalog.hashtext(aggregatetype) OPERATOR(pg_catalog.#) pg_catalog.hashtext(aggregateid))
       OPERATOR(pg_catalog.&) 63;
COMMENT ON FUNCTION outbox.shard_of(pg_catalog.text, pg_catalog.text) IS
  'The shard (0 to 63) of a key: one relay worker at a time sends a shard''s events, in order.';

-- The relay's progress per shard: every event of the shard with seq < low_water is
-- published, dead-lettered or waiting for a retry. Written by the shard's owner only; a
-- worker that gains a shard starts from its row. outbox.relay_state.low_water is the least
-- of them. Not dumped: after a restore the relay starts from 0 once.
CREATE TABLE outbox.relay_shards (
    shard      pg_catalog.int4        PRIMARY KEY
               CHECK (shard OPERATOR(pg_catalog.>=) 0 AND shard OPERATOR(pg_catalog.<) 64),
    low_water  pg_catalog.int8        NOT NULL DEFAULT 0,
    updated_at pg_catalog.timestamptz
);
INSERT INTO outbox.relay_shards (shard, low_water)
SELECT s, (SELECT r.low_water FROM outbox.relay_state r)
  FROM pg_catalog.generate_series(0, 63) s;

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

-- The time of the delivery log's batch that holds seq, or NULL: the one way every query asks
-- the log about an event. Each call is a fresh scan of the GiST index, never a rescan of one
-- inside a join: PostgreSQL's GiST scans (15 to 18) can mark live index entries dead when
-- rescanned, which hides delivered events (docs/design.md, "The delivery log"). SECURITY
-- DEFINER: it reads the log for the views' readers, as the views did. enable_seqscan off: the
-- planner prices a scan of the log's few rows as cheap, but each holds kilobytes of ranges
-- out of line; read whole per probe, they made a probe 2 ms instead of 50 us (status of a
-- 200,000-event backlog: 7 s against minutes; bench/relay/README.md, "Parallel workers").
CREATE FUNCTION outbox._delivered_at(seq pg_catalog.int8)
RETURNS pg_catalog.timestamptz
LANGUAGE sql
STABLE STRICT PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
  SELECT d.delivered_at FROM outbox.deliveries d WHERE d.seqs OPERATOR(pg_catalog.@>) seq LIMIT 1
$$;
REVOKE ALL ON FUNCTION outbox._delivered_at(pg_catalog.int8) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox._delivered_at(pg_catalog.int8) TO pg_monitor;

-- Shard ownership: session advisory locks (pg_locks: classid 0, objid = the shard, objsubid
-- 28531). The relay takes them with the same code; these are for tests and operators.
CREATE FUNCTION outbox._claim_shards(shards pg_catalog.int4[])
RETURNS pg_catalog.int4[]
AS 'MODULE_PATHNAME', 'outbox_claim_shards'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION outbox._claim_shards(pg_catalog.int4[]) IS
  'Takes the free shards of those given for this session; returns the ones it owns.';
CREATE FUNCTION outbox._release_shards(shards pg_catalog.int4[])
RETURNS pg_catalog.int4[]
AS 'MODULE_PATHNAME', 'outbox_release_shards'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION outbox._release_shards(pg_catalog.int4[]) IS
  'Gives back the shards of those given that this session owns; returns them.';

-- The relay's sink: which sink library and its options. Secrets are never stored here: a
-- secret option names a file under outbox.sink_files_directory (docs/security.md).
-- Readable only by its owner; dumped by pg_dump.
CREATE TABLE outbox.sink_config (
    singleton  pg_catalog.bool        PRIMARY KEY DEFAULT true CHECK (singleton),
    sink       pg_catalog.text        NOT NULL,
    options    pg_catalog.jsonb       NOT NULL DEFAULT '{}',
    updated_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('outbox.sink_config'::pg_catalog.regclass, '');

CREATE FUNCTION outbox.enqueue(
    aggregatetype pg_catalog.text,
    aggregateid   pg_catalog.text,
    type          pg_catalog.text,
    payload       pg_catalog.jsonb,
    headers       pg_catalog.jsonb DEFAULT NULL,
    id            pg_catalog.uuid  DEFAULT NULL)
RETURNS pg_catalog.uuid
AS 'MODULE_PATHNAME', 'outbox_enqueue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER;
-- enqueue and enqueue_batch do not pin search_path: their SQL is prepared statements on
-- outbox.events, schema-qualified, with typed parameters and no operator or function names,
-- so no search_path can change what they do (sql/privileges.sql tries). Pinning it cost a
-- sixth of enqueue's server time (a GUC save and restore on every call).
COMMENT ON FUNCTION outbox.enqueue(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.jsonb, pg_catalog.uuid) IS
  'Writes one event in the current transaction and returns its id (UUIDv7 unless given; a given id is an idempotency key).';

CREATE FUNCTION outbox.enqueue_batch(events pg_catalog.jsonb)
RETURNS pg_catalog.uuid[]
AS 'MODULE_PATHNAME', 'outbox_enqueue_batch'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE SECURITY DEFINER;
COMMENT ON FUNCTION outbox.enqueue_batch(pg_catalog.jsonb) IS
  'Writes a JSON array of events in the current transaction; returns their ids in order.';

CREATE FUNCTION outbox._partition_settings(
    OUT interval_seconds pg_catalog.int4,
    OUT retention_seconds pg_catalog.int4,
    OUT premake pg_catalog.int4,
    OUT lock_timeout_ms pg_catalog.int4,
    OUT fillfactor pg_catalog.int4)
AS 'MODULE_PATHNAME', 'outbox_partition_settings'
LANGUAGE C STABLE
SET search_path = pg_catalog, pg_temp;

-- Makes one partition with its indexes, and attaches it without blocking writers: CREATE
-- TABLE ... PARTITION OF would take ACCESS EXCLUSIVE on outbox.events, ATTACH PARTITION
-- takes only SHARE UPDATE EXCLUSIVE. It keeps outbox.partition_fillfactor percent of each
-- page for its rows and leaves the rest for their published versions. No index mentions
-- published_at, so marking an event published is a heap-only update when its page has room.
CREATE FUNCTION outbox._create_partition(p_lower timestamptz, p_upper timestamptz)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_name text := 'events_' || to_char(p_lower AT TIME ZONE 'UTC', 'YYYYMMDD"_"HH24MISS');
BEGIN
    EXECUTE format('CREATE TABLE outbox.%I (LIKE outbox.events INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION)'
                   ' WITH (fillfactor = %s)', v_name, (outbox._partition_settings()).fillfactor);
    PERFORM outbox._create_partition_indexes(v_name);
    EXECUTE format('ALTER TABLE outbox.events ATTACH PARTITION outbox.%I FOR VALUES FROM (%L) TO (%L)',
                   v_name, p_lower, p_upper);
    INSERT INTO outbox.partitions (name, lower_bound, upper_bound) VALUES (v_name, p_lower, p_upper);
    RETURN v_name;
END
$$;

-- A partition's indexes: new events, scanned from the relay's low-water mark (_queue); events
-- waiting for a retry (_retry); dead letters (_dead); lookup by event id (_id: an id given to
-- enqueue, requeue, support questions). _queue and _id take keys in increasing order: their
-- pages are filled to 100 %, so a page split moves almost nothing to the new page.
CREATE FUNCTION outbox._create_partition_indexes(p_name text)
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

-- The start of the partition that holds time t: multiples of the interval since the epoch.
CREATE FUNCTION outbox._bucket_start(t timestamptz, interval_seconds integer)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT to_timestamp(floor(extract(epoch FROM t) / interval_seconds) * interval_seconds)
$$;

-- Makes the partitions that should exist at p_now: the current interval, outbox.premake
-- ahead, any hole in that range, and after a pause one partition covering the whole gap.
-- Called by rotate(), and by enqueue when outbox.events has no partition at all (right after
-- CREATE EXTENSION, which makes none: a restore from pg_dump brings its own). It first takes
-- the lock that creating a partition needs anyway, so two callers never race: the second
-- finds the first one's partitions.
CREATE FUNCTION outbox._create_partitions(p_now timestamptz)
RETURNS TABLE (action text, partition text, lower_bound timestamptz, upper_bound timestamptz, detail text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    s          record;
    v_step     interval;
    v_newest   timestamptz;
    v_lower    timestamptz;
    v_upper    timestamptz;
    v_next     timestamptz;
    v_target   timestamptz;
    v_current  timestamptz;
BEGIN
    LOCK TABLE outbox.events IN SHARE UPDATE EXCLUSIVE MODE;
    SELECT * INTO s FROM outbox._partition_settings();
    v_step    := make_interval(secs => s.interval_seconds);
    v_current := outbox._bucket_start(p_now, s.interval_seconds);
    v_target  := v_current + v_step * (s.premake + 1);

    -- Forget partitions that were dropped or detached by hand.
    DELETE FROM outbox.partitions q
     WHERE NOT EXISTS (SELECT 1 FROM pg_inherits i
                        WHERE i.inhparent = 'outbox.events'::regclass
                          AND i.inhrelid = to_regclass(format('outbox.%I', q.name)));

    SELECT max(q.upper_bound) INTO v_newest FROM outbox.partitions q;

    -- Coverage from now up to premake intervals ahead, contiguous with the past.
    v_lower := v_current;
    IF v_newest IS NOT NULL THEN
        IF v_newest <= p_now THEN
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
END
$$;

-- Takes a lock that rotation needs on p_table (p_mode: a lock mode, from rotation's own
-- code only). Waiting for it could queue writers or consumers behind rotation, and waiting
-- without limit would stall them all, so it waits at most outbox.rotate_lock_timeout; 0
-- means NOWAIT: never queue at all (as PgQ does). False, with a NOTICE, when the lock was not
-- granted in time: p_left, the work that needed it, is left for the next run.
CREATE FUNCTION outbox._lock_for_rotation(p_table regclass, p_mode text, p_timeout_ms integer, p_left text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_old_timeout text := current_setting('lock_timeout');
BEGIN
    PERFORM set_config('lock_timeout', p_timeout_ms || 'ms', true);
    BEGIN
        EXECUTE format('LOCK TABLE %s IN %s MODE%s', p_table, p_mode,
                       CASE WHEN p_timeout_ms = 0 THEN ' NOWAIT' ELSE '' END);
    EXCEPTION WHEN lock_not_available THEN
        PERFORM set_config('lock_timeout', v_old_timeout, true);
        RAISE NOTICE 'outbox.rotate: % is busy; % is left for the next run', p_table, p_left
            USING DETAIL = format('The lock was not granted within %s ms.', p_timeout_ms);
        RETURN false;
    END;
    PERFORM set_config('lock_timeout', v_old_timeout, true);
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION outbox._lock_for_rotation(regclass, text, integer, text) FROM PUBLIC;

-- The ACCESS EXCLUSIVE lock that dropping a partition of p_table needs, bounded as every
-- lock of rotation is.
CREATE FUNCTION outbox._lock_to_drop(p_table regclass, p_timeout_ms integer)
RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT outbox._lock_for_rotation(p_table, 'ACCESS EXCLUSIVE', p_timeout_ms, 'dropping old partitions')
$$;
REVOKE ALL ON FUNCTION outbox._lock_to_drop(regclass, integer) FROM PUBLIC;

-- The events' part of outbox.rotate().
CREATE FUNCTION outbox._rotate_events()
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
    -- The lock that making partitions takes (_create_partitions), bounded: an operator's
    -- ANALYZE, say, holds it.
    IF NOT outbox._lock_for_rotation('outbox.events', 'SHARE UPDATE EXCLUSIVE', s.lock_timeout_ms,
                                     'making and dropping partitions') THEN
        RETURN QUERY SELECT 'skipped', NULL::text, NULL::timestamptz, NULL::timestamptz,
                            'outbox.events is busy: its lock was not granted in time'::text;
        RETURN;
    END IF;
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

    IF NOT outbox._lock_to_drop('outbox.events', s.lock_timeout_ms) THEN
        RETURN QUERY
            SELECT 'skipped', q.name, q.lower_bound, q.upper_bound, 'lock not granted in time'::text
              FROM outbox.partitions q WHERE q.name = ANY (v_candidates) ORDER BY q.lower_bound;
        RETURN;
    END IF;

    -- With the lock held no writer is in flight, and each statement's snapshot sees every
    -- committed event: the unpublished check cannot miss one. Below the relay's low-water
    -- mark every event is published or dead-lettered, so it reads only the index entries
    -- above the mark, the retries and the dead letters (three index probes).
    SELECT r.low_water INTO v_low_water FROM outbox.relay_state r;
    FOR p IN SELECT q.* FROM outbox.partitions q WHERE q.name = ANY (v_candidates) ORDER BY q.lower_bound
    LOOP
        -- A session reading the partition itself holds a lock on it alone.
        IF NOT outbox._lock_for_rotation(format('outbox.%I', p.name)::regclass, 'ACCESS EXCLUSIVE',
                                         s.lock_timeout_ms, 'dropping it') THEN
            RETURN QUERY SELECT 'skipped', p.name, p.lower_bound, p.upper_bound, 'lock not granted in time'::text;
            CONTINUE;
        END IF;
        IF EXISTS (SELECT 1 FROM outbox.replays r
                    WHERE r.state = 'running' AND r.since < p.upper_bound AND r.until > p.lower_bound) THEN
            RETURN QUERY SELECT 'kept', p.name, p.lower_bound, p.upper_bound, 'a running replay reads it'::text;
            CONTINUE;
        END IF;
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM outbox.%1$I e WHERE seq >= $1 AND published_at IS NULL AND dead_at IS NULL'
                       '                 AND outbox._delivered_at(e.seq) IS NULL)'
                       ' OR EXISTS (SELECT 1 FROM outbox.%1$I WHERE next_attempt_at IS NOT NULL AND published_at IS NULL)'
                       ' OR EXISTS (SELECT 1 FROM outbox.%1$I WHERE dead_at IS NOT NULL AND published_at IS NULL AND discarded_at IS NULL)', p.name)
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
        INSERT INTO outbox.retained_since AS r (since) VALUES (p.upper_bound)
            ON CONFLICT (singleton) DO UPDATE SET since = greatest(r.since, EXCLUDED.since);
        RETURN QUERY SELECT 'dropped', p.name, p.lower_bound, p.upper_bound, NULL::text;
    END LOOP;
    -- The delivery log's rows below the oldest event left name only events that are gone.
    DELETE FROM outbox.deliveries d
     WHERE d.seqs << int8range(coalesce((SELECT min(e.seq) FROM outbox.events e), 9223372036854775807), NULL);
END
$$;

-- The consumer's inbox (outbox.inbox_receive, docs/reference.md): which events a consumer
-- has applied, so that it applies each once. A row per (consumer, event id), partitioned by
-- the event's own time (a UUIDv7's, or the time the consumer gives for another id), so that
-- every copy of an event meets its first copy's row in the same partition, and old records
-- go with their partitions, as events do. Each partition has its own unique index.
CREATE TABLE outbox.inbox (
    event_at    pg_catalog.timestamptz NOT NULL,
    received_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
    event_id    pg_catalog.uuid        NOT NULL,
    consumer    pg_catalog.text        NOT NULL
) PARTITION BY RANGE (event_at);
COMMENT ON TABLE outbox.inbox IS
  'The events each consumer applied (outbox.inbox_receive), partitioned by the event''s time; rotated by outbox.rotate().';

-- The inbox's partitions, as outbox.partitions is the events'.
CREATE TABLE outbox.inbox_partitions (
    name        pg_catalog.text        PRIMARY KEY,
    lower_bound pg_catalog.timestamptz NOT NULL,
    upper_bound pg_catalog.timestamptz NOT NULL,
    created_at  pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CHECK (lower_bound OPERATOR(pg_catalog.<) upper_bound)
);
SELECT pg_catalog.pg_extension_config_dump('outbox.inbox_partitions'::pg_catalog.regclass, '');

CREATE FUNCTION outbox._inbox_retention()
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME', 'outbox_inbox_retention'
LANGUAGE C STABLE
SET search_path = pg_catalog, pg_temp;

-- Makes the inbox's partitions: one per interval from now to outbox.premake intervals ahead,
-- and one that covers the time since the newest partition, at most outbox.inbox_retention
-- back (an event older than any partition is past retention anyway). Under the lock that
-- attaching takes anyway, so that two callers never race.
CREATE FUNCTION outbox._create_inbox_partitions(p_now timestamptz)
RETURNS TABLE (action text, partition text, lower_bound timestamptz, upper_bound timestamptz, detail text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    s         record;
    v_step    interval;
    v_current timestamptz;
    v_lower   timestamptz;
    v_upper   timestamptz;
BEGIN
    LOCK TABLE outbox.inbox IN SHARE UPDATE EXCLUSIVE MODE;
    SELECT * INTO s FROM outbox._partition_settings();
    DELETE FROM outbox.inbox_partitions q
     WHERE NOT EXISTS (SELECT 1 FROM pg_inherits i
                        WHERE i.inhparent = 'outbox.inbox'::regclass
                          AND i.inhrelid = to_regclass(format('outbox.%I', q.name)));
    v_step := make_interval(secs => s.interval_seconds);
    v_current := outbox._bucket_start(p_now, s.interval_seconds);
    SELECT greatest(max(q.upper_bound),
                    outbox._bucket_start(p_now - make_interval(secs => outbox._inbox_retention()),
                                         s.interval_seconds))
      INTO v_lower FROM outbox.inbox_partitions q;
    WHILE v_lower < v_current + v_step * (s.premake + 1) LOOP
        v_upper := greatest(outbox._bucket_start(v_lower, s.interval_seconds) + v_step, v_current);
        partition := 'inbox_' || to_char(v_lower AT TIME ZONE 'UTC', 'YYYYMMDD"_"HH24MISS');
        -- Made meanwhile by a transaction that this one's snapshot does not see (REPEATABLE
        -- READ); the catalog does.
        IF to_regclass(format('outbox.%I', partition)) IS NOT NULL THEN
            v_lower := v_upper;
            CONTINUE;
        END IF;
        EXECUTE format('CREATE TABLE outbox.%I (LIKE outbox.inbox INCLUDING DEFAULTS)', partition);
        EXECUTE format('CREATE UNIQUE INDEX %I ON outbox.%I (consumer, event_id)', partition || '_key', partition);
        EXECUTE format('ALTER TABLE outbox.inbox ATTACH PARTITION outbox.%I FOR VALUES FROM (%L) TO (%L)',
                       partition, v_lower, v_upper);
        INSERT INTO outbox.inbox_partitions (name, lower_bound, upper_bound) VALUES (partition, v_lower, v_upper);
        RETURN QUERY SELECT 'created', partition, v_lower, v_upper,
            CASE WHEN v_upper = v_current AND v_lower < v_current - v_step THEN 'covers the time up to now' END;
        v_lower := v_upper;
    END LOOP;
END
$$;

-- Rotation of the inbox, on its own or as part of outbox.rotate(): partitions ahead, and
-- those past outbox.inbox_retention dropped. A record that is gone can no longer tell a
-- duplicate: inbox_receive() then says the event is new. An inbox never used has no
-- partition, and gets none here: its first inbox_receive() makes them.
CREATE FUNCTION outbox.rotate_inbox()
RETURNS TABLE (action text, partition text, lower_bound timestamptz, upper_bound timestamptz, detail text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    s           record;
    v_now       timestamptz := clock_timestamp();
    v_retention integer;
    v_old       text[];
    p           record;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('outbox.rotate_inbox')) THEN
        RAISE NOTICE 'outbox.rotate_inbox: another rotation of the inbox is running; nothing done';
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = 'outbox.inbox'::regclass) THEN
        RETURN;
    END IF;
    SELECT * INTO s FROM outbox._partition_settings();
    v_retention := outbox._inbox_retention();
    -- The lock that making partitions takes (_create_inbox_partitions), bounded: a consumer
    -- whose inbox_receive made a partition holds it until its transaction ends.
    IF NOT outbox._lock_for_rotation('outbox.inbox', 'SHARE UPDATE EXCLUSIVE', s.lock_timeout_ms,
                                     'rotating the inbox') THEN
        RETURN QUERY SELECT 'skipped', NULL::text, NULL::timestamptz, NULL::timestamptz,
                            'outbox.inbox is busy: its lock was not granted in time'::text;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM outbox._create_inbox_partitions(v_now);
    IF v_retention = 0 THEN
        RETURN;
    END IF;
    SELECT array_agg(q.name ORDER BY q.lower_bound) INTO v_old FROM outbox.inbox_partitions q
     WHERE q.upper_bound <= v_now - make_interval(secs => v_retention);
    IF v_old IS NULL THEN
        RETURN;
    END IF;
    IF NOT outbox._lock_to_drop('outbox.inbox', s.lock_timeout_ms) THEN
        RETURN QUERY SELECT 'skipped', q.name, q.lower_bound, q.upper_bound, 'lock not granted in time'::text
                       FROM outbox.inbox_partitions q WHERE q.name = ANY (v_old) ORDER BY q.lower_bound;
        RETURN;
    END IF;
    FOR p IN SELECT q.* FROM outbox.inbox_partitions q WHERE q.name = ANY (v_old) ORDER BY q.lower_bound LOOP
        EXECUTE format('DROP TABLE outbox.%I', p.name);
        DELETE FROM outbox.inbox_partitions q WHERE q.name = p.name;
        RETURN QUERY SELECT 'dropped', p.name, p.lower_bound, p.upper_bound, NULL::text;
    END LOOP;
END
$$;
COMMENT ON FUNCTION outbox.rotate_inbox() IS
  'Makes the inbox''s future partitions and drops those past outbox.inbox_retention (outbox.rotate() calls it).';

-- Records that `consumer` received the event, in the caller's transaction: true the first
-- time, false for a copy (also once the first copy's transaction commits, when two race).
-- event_time is needed only for an id that is not a UUIDv7: the event's own time (its
-- created_at, CloudEvents' time), the same for every copy.
CREATE FUNCTION outbox.inbox_receive(consumer pg_catalog.text, event_id pg_catalog.uuid,
                                     event_time pg_catalog.timestamptz DEFAULT NULL)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'outbox_inbox_receive'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
-- Not SECURITY DEFINER: it checks the consumer name against the calling role (current_user),
-- then acts as its owner (src/pg/inbox.cpp). Like enqueue, it does not pin search_path: its
-- one statement is prepared on the partition, schema-qualified, with typed parameters
-- (sql/privileges.sql tries).
COMMENT ON FUNCTION outbox.inbox_receive(pg_catalog.text, pg_catalog.uuid, pg_catalog.timestamptz) IS
  'Records that a consumer received an event, in the caller''s transaction: true the first time, false for a duplicate.';
REVOKE ALL ON FUNCTION outbox.inbox_receive(pg_catalog.text, pg_catalog.uuid, pg_catalog.timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.rotate_inbox() FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._create_inbox_partitions(timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._inbox_retention() FROM PUBLIC;
REVOKE ALL ON outbox.inbox, outbox.inbox_partitions FROM PUBLIC;

-- Consumer names bound to roles (docs/security.md): a name bound to roles takes only them
-- (and the roles that have their privileges) in inbox_receive; a name bound to none takes
-- any role granted inbox_receive, unless outbox.inbox_require_binding is on. The owner
-- binds; a role's binding follows it through a rename. Dumped by pg_dump (by role name).
CREATE TABLE outbox.inbox_consumers (
    consumer pg_catalog.text        NOT NULL,
    role     pg_catalog.regrole     NOT NULL,
    bound_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (consumer, role)
);
COMMENT ON TABLE outbox.inbox_consumers IS
  'The roles each consumer name is bound to (outbox.bind_inbox_consumer): only they may record under the name with outbox.inbox_receive.';
SELECT pg_catalog.pg_extension_config_dump('outbox.inbox_consumers'::pg_catalog.regclass, '');

-- Every backend reads the bindings once and again after each change: this trigger sends the
-- invalidation, whoever changes the table (the functions below, or the owner by hand).
CREATE FUNCTION outbox._inbox_consumers_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'outbox_inbox_consumers_changed'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;
CREATE TRIGGER inbox_consumers_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON outbox.inbox_consumers
    FOR EACH STATEMENT EXECUTE FUNCTION outbox._inbox_consumers_changed();

-- The arguments of bind_inbox_consumer (p_bind) and unbind_inbox_consumer: 22004 for a NULL
-- one; a name to bind follows inbox_receive's rules (22023 or 22001, as it raises them).
CREATE FUNCTION outbox._check_inbox_binding(p_consumer pg_catalog.text, p_role pg_catalog.regrole,
                                            p_bind pg_catalog.bool)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_check_inbox_binding'
LANGUAGE C IMMUTABLE
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION outbox.bind_inbox_consumer(consumer pg_catalog.text, role pg_catalog.regrole)
RETURNS pg_catalog.bool
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM outbox._check_inbox_binding(consumer, role, true);
    INSERT INTO outbox.inbox_consumers AS c (consumer, role)
    VALUES (bind_inbox_consumer.consumer, bind_inbox_consumer.role)
    ON CONFLICT DO NOTHING;
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION outbox.bind_inbox_consumer(pg_catalog.text, pg_catalog.regrole) IS
  'Binds a consumer name to a role: from then on inbox_receive takes the name only from the roles bound to it (and those with their privileges). True if the binding is new.';

CREATE FUNCTION outbox.unbind_inbox_consumer(consumer pg_catalog.text, role pg_catalog.regrole)
RETURNS pg_catalog.bool
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM outbox._check_inbox_binding(consumer, role, false);
    DELETE FROM outbox.inbox_consumers c
     WHERE c.consumer = unbind_inbox_consumer.consumer AND c.role = unbind_inbox_consumer.role;
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION outbox.unbind_inbox_consumer(pg_catalog.text, pg_catalog.regrole) IS
  'Removes a binding of a consumer name to a role; a name left with none is open to every role granted inbox_receive again (unless outbox.inbox_require_binding). True if there was one.';
REVOKE ALL ON FUNCTION outbox._inbox_consumers_changed() FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._check_inbox_binding(pg_catalog.text, pg_catalog.regrole, pg_catalog.bool) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.bind_inbox_consumer(pg_catalog.text, pg_catalog.regrole) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.unbind_inbox_consumer(pg_catalog.text, pg_catalog.regrole) FROM PUBLIC;
REVOKE ALL ON outbox.inbox_consumers FROM PUBLIC;

-- Rotation, as pg_cron runs it: the inbox's partitions, then the events'. Each part takes
-- its own locks, each wait bounded by outbox.rotate_lock_timeout, and can run alone
-- (outbox.rotate_inbox()). The inbox comes first so that no wait for its locks ever happens
-- while this transaction holds the events' lock, which writers and the relay need.
CREATE FUNCTION outbox.rotate()
RETURNS TABLE (action text, partition text, lower_bound timestamptz, upper_bound timestamptz, detail text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY SELECT * FROM outbox.rotate_inbox();
    RETURN QUERY SELECT * FROM outbox._rotate_events();
END
$$;
COMMENT ON FUNCTION outbox.rotate() IS
  'Makes future partitions of the events and the inbox; drops the events'' past outbox.retention that hold no unpublished event, and the inbox''s past outbox.inbox_retention.';
REVOKE ALL ON FUNCTION outbox._rotate_events() FROM PUBLIC;


-- Checks the sink library and its options (it creates the sink once and closes it). Its
-- errors never repeat the statement (which could hold a secret given by mistake).
CREATE FUNCTION outbox._check_sink(sink text, options jsonb)
RETURNS text
AS 'MODULE_PATHNAME', 'outbox_check_sink'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;

-- Wakes the relay at commit and makes it read its configuration again.
CREATE FUNCTION outbox._notify_relay()
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_notify_relay'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

-- Checks and stores the sink configuration; the relay picks it up at commit: no restart.
CREATE FUNCTION outbox.configure_sink(sink text, options jsonb DEFAULT '{}')
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
COMMENT ON FUNCTION outbox.configure_sink(text, jsonb) IS
  'Sets the relay''s sink (null, kafka, or a third-party outbox_sink_<name>.so) and its options.';

CREATE FUNCTION outbox.unconfigure_sink()
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_removed boolean;
BEGIN
    DELETE FROM outbox.sink_config;
    v_removed := FOUND;
    PERFORM outbox._notify_relay();
    RETURN v_removed;
END
$$;
COMMENT ON FUNCTION outbox.unconfigure_sink() IS
  'Removes the relay''s sink: the relay stops sending and events wait until outbox.configure_sink() is called again. True if a sink was configured.';

-- One row per relay worker slot, from shared memory: running or not, and why not. One row
-- saying so when outbox is not preloaded or outbox.workers is 0.
CREATE FUNCTION outbox._workers(
    OUT worker int, OUT pid int, OUT state text, OUT sink text,
    OUT batches bigint, OUT events_sent bigint, OUT events_failed bigint,
    OUT events_dead bigint, OUT last_error text, OUT last_error_at timestamptz,
    OUT last_success_at timestamptz, OUT backoff_until timestamptz,
    OUT database text, OUT detail text, OUT shards int)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'outbox_workers'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

-- What an operator watches. The lag is what is still unpublished and how old it is, not
-- max(id) - last_id (which reads zero while events are being lost). It reads index ranges
-- above the relay's low-water mark and the retries: it costs what the backlog costs. A held
-- key is one whose earliest unresolved event waits for a retry (a rejection, or a transient
-- failure while other keys were delivered); its later events wait behind it. last_error
-- stays for diagnosis; last_error_current says whether it still holds: no event was
-- acknowledged since (outbox.relay_metrics' last_error_current, the same test).
CREATE VIEW outbox.status AS
SELECT w.worker, w.pid, w.state, w.sink, w.batches, w.events_sent, w.events_failed,
       w.events_dead, w.last_error, w.last_error_at, w.last_success_at, w.backoff_until,
       q.unpublished, q.oldest_unpublished_age, d.dead_lettered, w.database, w.detail,
       w.shards, h.held_keys, o.oldest_held_key, o.oldest_held_error, o.oldest_held_age,
       (w.last_error_at IS NOT NULL
        AND (w.last_success_at IS NULL
             OR w.last_error_at OPERATOR(pg_catalog.>) w.last_success_at)) AS last_error_current
  FROM (SELECT pg_catalog.count(*) AS unpublished,
               pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(e.created_at)
                 AS oldest_unpublished_age
          FROM outbox.events e
         WHERE (e.seq OPERATOR(pg_catalog.>=)
                  COALESCE((SELECT r.low_water FROM outbox.relay_state r), 0::pg_catalog.int8)
                OR e.next_attempt_at IS NOT NULL)
           AND e.published_at IS NULL AND e.dead_at IS NULL
           AND outbox._delivered_at(e.seq) IS NULL) q
 CROSS JOIN (SELECT pg_catalog.count(*) AS dead_lettered FROM outbox.events e
              WHERE e.dead_at IS NOT NULL AND e.published_at IS NULL AND e.discarded_at IS NULL) d
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

-- Dead letters: events the sink rejected outbox.max_attempts times. They stay in the table
-- (and keep their partition) until requeued, published or discarded.
CREATE VIEW outbox.dead_letters AS
SELECT e.id, e.seq, e.aggregatetype, e.aggregateid, e.type, e.created_at, e.attempts,
       e.last_error, e.dead_at
  FROM outbox.events e
 WHERE e.published_at IS NULL AND e.dead_at IS NOT NULL AND e.discarded_at IS NULL;

-- Each event's delivery, as the relay's state says it: the one place to ask whether an event
-- was published, and when. Published: marked on the row (0.5.0's relay, and retries), or in
-- the delivery log (one probe of it per event that is neither). Exact as of the last batch
-- the relay committed.
CREATE VIEW outbox.event_status AS
SELECT e.id, e.seq, e.aggregatetype, e.aggregateid, e.type, e.payload, e.headers, e.created_at,
       CASE WHEN e.published_at IS NOT NULL OR l.delivered_at IS NOT NULL THEN 'published'
            WHEN e.discarded_at IS NOT NULL THEN 'discarded'
            WHEN e.dead_at IS NOT NULL THEN 'dead'
            WHEN e.next_attempt_at IS NOT NULL THEN 'retrying'
            ELSE 'pending' END AS state,
       COALESCE(e.published_at, l.delivered_at) AS published_at, e.attempts, e.last_error,
       e.next_attempt_at, e.dead_at, e.discarded_at
  FROM outbox.events e
  LEFT JOIN LATERAL (  -- OFFSET 0: one call per event, not one per use of its result
        SELECT outbox._delivered_at(e.seq) AS delivered_at
         WHERE e.published_at IS NULL AND e.dead_at IS NULL AND e.next_attempt_at IS NULL
        OFFSET 0) l ON true;
COMMENT ON VIEW outbox.event_status IS
  'Every event with its delivery state: pending, retrying (itself, or behind an earlier event of its key), dead, discarded (a dead letter given up), or published (and when).';

-- A requeued event takes a new sequence number: it goes to the end of the queue, above the
-- relay's low-water mark, as a new event would.
CREATE FUNCTION outbox.requeue(event_id uuid)
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
           next_attempt_at = NULL, discarded_at = NULL
     WHERE id = event_id AND published_at IS NULL
       AND outbox._delivered_at(events.seq) IS NULL;
    v_found := FOUND;
    IF v_found THEN
        PERFORM outbox._count_requeued(1);
    END IF;
    PERFORM outbox._notify_relay();
    RETURN v_found;
END
$$;
COMMENT ON FUNCTION outbox.requeue(uuid) IS
  'Sends a dead-lettered, discarded or waiting event again: clears dead_at, discarded_at, attempts and the retry time.';

-- Dead letters in bulk. requeue_dead() and discard_dead() pick dead letters by the same
-- filters (NULL: any; error_like is a LIKE pattern on last_error; [dead_after, dead_before)
-- on dead_at), count them without writing (dry_run), or act on them and log the action.
-- A discarded event stays in its partition, as 'discarded' in outbox.event_status, until
-- rotation drops the partition: it no longer keeps the partition, nor counts as a dead
-- letter. requeue() of its id sends it again.
CREATE TABLE outbox.dead_letter_actions (
    at      pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
    by_user pg_catalog.text        NOT NULL,
    action  pg_catalog.text        NOT NULL CHECK (action OPERATOR(pg_catalog.=) ANY ('{requeue,discard}')),
    filter  pg_catalog.jsonb       NOT NULL,
    events  pg_catalog.int8        NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('outbox.dead_letter_actions'::pg_catalog.regclass, '');
COMMENT ON TABLE outbox.dead_letter_actions IS
  'Every requeue_dead() and discard_dead() that acted: when, by whom (the session''s user), with which filter, on how many events.';

-- The filters that replay(), requeue_dead() and discard_dead() take, checked before they are
-- used or stored. A name that no event can have (empty, or over 255 characters: enqueue
-- refuses both) would match nothing: refused, as enqueue refuses it (22023, 22001). A LIKE
-- pattern over 1000 characters (54000): no real last_error needs one that long to be told
-- apart, and each row's match and the log line would pay for it. No message repeats a value.
CREATE FUNCTION outbox._check_filters(p_function text, p_aggregatetype text, p_type text,
                                      p_aggregateid text, p_error_like text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f record;
BEGIN
    FOR f IN SELECT v.name, v.value FROM (VALUES ('aggregatetype', p_aggregatetype), ('type', p_type),
                                                 ('aggregateid', p_aggregateid)) v(name, value)
              WHERE v.value IS NOT NULL LOOP
        IF f.value = '' THEN
            RAISE EXCEPTION '%: the % filter is empty', p_function, f.name
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('No event has an empty %s.', f.name),
                      HINT = format('Pass NULL for any %s.', f.name);
        END IF;
        IF length(f.value) > 255 THEN
            RAISE EXCEPTION '%: the % filter is too long', p_function, f.name
                USING ERRCODE = 'string_data_right_truncation',
                      DETAIL = format('It has %s characters; an event''s %s has at most 255.',
                                      length(f.value), f.name);
        END IF;
    END LOOP;
    IF length(p_error_like) > 1000 THEN
        RAISE EXCEPTION '%: error_like is too long', p_function
            USING ERRCODE = 'program_limit_exceeded',
                  DETAIL = format('It has %s characters; a pattern may have at most 1000.',
                                  length(p_error_like));
    END IF;
END
$$;

CREATE FUNCTION outbox._act_on_dead(p_action text, p_aggregatetype text, p_type text,
                                    p_error_like text, p_dead_after timestamptz,
                                    p_dead_before timestamptz, p_dry_run boolean)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_seqs   bigint[];
    v_count  bigint;
    v_filter jsonb := jsonb_strip_nulls(jsonb_build_object(
        'aggregatetype', p_aggregatetype, 'type', p_type, 'error_like', p_error_like,
        'dead_after', p_dead_after, 'dead_before', p_dead_before));
    v_logged text;
BEGIN
    IF p_dry_run IS NULL THEN
        RAISE EXCEPTION 'outbox.%_dead: dry_run must not be NULL', p_action USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_dead_after >= p_dead_before THEN
        RAISE EXCEPTION 'outbox.%_dead: dead_after must be before dead_before', p_action
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('dead_after is %s, dead_before %s.', p_dead_after, p_dead_before);
    END IF;
    PERFORM outbox._check_filters(format('outbox.%s_dead', p_action), p_aggregatetype, p_type,
                                  NULL, p_error_like);
    -- The dead letters' own index (each partition's _dead), then a recheck under the
    -- UPDATE's row locks: a concurrent requeue or discard takes each event once.
    SELECT array_agg(e.seq) INTO v_seqs FROM outbox.events e
     WHERE e.dead_at IS NOT NULL AND e.published_at IS NULL AND e.discarded_at IS NULL
       AND (p_aggregatetype IS NULL OR e.aggregatetype = p_aggregatetype)
       AND (p_type IS NULL OR e.type = p_type)
       AND (p_error_like IS NULL OR e.last_error LIKE p_error_like)
       AND (p_dead_after IS NULL OR e.dead_at >= p_dead_after)
       AND (p_dead_before IS NULL OR e.dead_at < p_dead_before);
    IF p_dry_run OR v_seqs IS NULL THEN
        RETURN coalesce(cardinality(v_seqs), 0);
    END IF;
    IF p_action = 'requeue' THEN
        UPDATE outbox.events e
           SET seq = outbox._next_seq('outbox.events_seq'::regclass), dead_at = NULL, attempts = 0,
               next_attempt_at = NULL
         WHERE e.seq = ANY (v_seqs) AND e.dead_at IS NOT NULL AND e.published_at IS NULL
           AND e.discarded_at IS NULL;
    ELSE
        UPDATE outbox.events e SET discarded_at = now()
         WHERE e.seq = ANY (v_seqs) AND e.dead_at IS NOT NULL AND e.published_at IS NULL
           AND e.discarded_at IS NULL;
    END IF;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    INSERT INTO outbox.dead_letter_actions (by_user, action, filter, events)
    VALUES (session_user, p_action, v_filter, v_count);
    -- The log line bounded; the whole filter is in the table.
    v_logged := v_filter::text;
    IF length(v_logged) > 1000 THEN
        v_logged := format('%s... (cut at 1000 of %s characters; the whole filter is in outbox.dead_letter_actions)',
                           left(v_logged, 1000), length(v_logged));
    END IF;
    RAISE LOG 'outbox: %_dead by %: % events (filter %)', p_action, session_user, v_count, v_logged;
    IF p_action = 'requeue' THEN
        PERFORM outbox._count_requeued(v_count);
        PERFORM outbox._notify_relay();
    END IF;
    RETURN v_count;
END
$$;

CREATE FUNCTION outbox.requeue_dead(aggregatetype text DEFAULT NULL, type text DEFAULT NULL,
                                    error_like text DEFAULT NULL, dead_after timestamptz DEFAULT NULL,
                                    dead_before timestamptz DEFAULT NULL, dry_run boolean DEFAULT false)
RETURNS bigint
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT outbox._act_on_dead('requeue', $1, $2, $3, $4, $5, $6) $$;
COMMENT ON FUNCTION outbox.requeue_dead(text, text, text, timestamptz, timestamptz, boolean) IS
  'Requeues the dead letters that match every filter given (none: all of them); dry_run counts them only.';

CREATE FUNCTION outbox.discard_dead(aggregatetype text DEFAULT NULL, type text DEFAULT NULL,
                                    error_like text DEFAULT NULL, dead_after timestamptz DEFAULT NULL,
                                    dead_before timestamptz DEFAULT NULL, dry_run boolean DEFAULT false)
RETURNS bigint
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT outbox._act_on_dead('discard', $1, $2, $3, $4, $5, $6) $$;
COMMENT ON FUNCTION outbox.discard_dead(text, text, text, timestamptz, timestamptz, boolean) IS
  'Discards the dead letters that match every filter given (none: all of them): kept until rotation, never sent; dry_run counts them only.';
REVOKE ALL ON FUNCTION outbox._check_filters(text, text, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._act_on_dead(text, text, text, text, timestamptz, timestamptz, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.requeue_dead(text, text, text, timestamptz, timestamptz, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.discard_dead(text, text, text, timestamptz, timestamptz, boolean) FROM PUBLIC;
REVOKE ALL ON outbox.dead_letter_actions FROM PUBLIC;

-- Replays (docs/reference.md#outboxreplay): published events of a window sent again, with
-- their own ids, by the database's replay worker (relay/replay.cpp), a lane of its own beside
-- the relays. A replay reads the events where they are, by seq from its position: nothing is
-- copied, no event row is written, and sealed partitions stay sealed. Not dumped: a restored
-- database resumes no replay.
CREATE TABLE outbox.replays (
    id             pg_catalog.int8        GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    state          pg_catalog.text        NOT NULL DEFAULT 'running'
                   CHECK (state OPERATOR(pg_catalog.=) ANY ('{running,done,cancelled}')),
    since          pg_catalog.timestamptz NOT NULL,
    until          pg_catalog.timestamptz NOT NULL,
    aggregatetype  pg_catalog.text,
    type           pg_catalog.text,
    aggregateid    pg_catalog.text,
    ids            pg_catalog.uuid[],
    -- The last seq handed out when it was requested: later events are not part of it.
    upto_seq       pg_catalog.int8        NOT NULL,
    -- Every event of the replay up to this seq has been sent (or skipped).
    position       pg_catalog.int8        NOT NULL DEFAULT 0,
    events_total   pg_catalog.int8        NOT NULL,
    events_sent    pg_catalog.int8        NOT NULL DEFAULT 0,
    events_skipped pg_catalog.int8        NOT NULL DEFAULT 0,
    last_error     pg_catalog.text,
    requested_by   pg_catalog.text        NOT NULL,
    requested_at   pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
    started_at     pg_catalog.timestamptz,
    finished_at    pg_catalog.timestamptz,
    updated_at     pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE outbox.replays IS
  'Every outbox.replay(): its window and filters, its state (running, done, cancelled) and progress.';

CREATE FUNCTION outbox._replay_requested()
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_replay_requested'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION outbox.replay(since timestamptz, until timestamptz,
                              aggregatetype text DEFAULT NULL, type text DEFAULT NULL,
                              aggregateid text DEFAULT NULL, ids uuid[] DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_oldest  record;
    v_since   timestamptz := since;
    v_dropped_until timestamptz;
    v_upto    bigint;
    v_total   bigint;
    v_id      bigint;
BEGIN
    IF since IS NULL OR until IS NULL THEN
        RAISE EXCEPTION 'outbox.replay: since and until must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF since >= until OR until = '-infinity' THEN
        RAISE EXCEPTION 'outbox.replay: since must be before until'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('since is %s, until %s.', since, until);
    END IF;
    IF cardinality(ids) = 0 THEN
        RAISE EXCEPTION 'outbox.replay: ids is empty'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass NULL for every id, or at least one id.';
    END IF;
    IF EXISTS (SELECT FROM unnest(ids) i WHERE i IS NULL) THEN
        RAISE EXCEPTION 'outbox.replay: ids holds a NULL'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'No event has a NULL id: pass the ids without it.';
    END IF;
    PERFORM outbox._check_filters('outbox.replay', replay.aggregatetype, replay.type,
                                  replay.aggregateid, NULL);
    -- Rotation drops partitions under an ACCESS EXCLUSIVE lock on outbox.events: with this
    -- one held, none goes until the replay is committed, and rotation then sees it.
    LOCK TABLE outbox.events IN ACCESS SHARE MODE;
    SELECT p.name, p.lower_bound INTO v_oldest FROM outbox.partitions p ORDER BY p.lower_bound LIMIT 1;
    -- The catalog, not this transaction's snapshot: a partition dropped before the lock.
    IF v_oldest.name IS NOT NULL AND to_regclass(format('outbox.%I', v_oldest.name)) IS NULL THEN
        RAISE EXCEPTION 'outbox.replay: a rotation dropped partitions meanwhile'
            USING ERRCODE = 'serialization_failure', HINT = 'Call it again.';
    END IF;
    -- A window that starts before what rotation dropped would be replayed in part: refused.
    -- Before the oldest partition, when rotation dropped nothing, there was never an event.
    SELECT r.since INTO v_dropped_until FROM outbox.retained_since r;
    IF since = '-infinity' THEN
        v_since := coalesce(v_oldest.lower_bound, since);
    ELSIF since < v_dropped_until THEN
        RAISE EXCEPTION 'outbox.replay: the window starts before the events rotation kept'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('since is %s; rotation dropped the events before %s (outbox.retention).',
                                  since, v_dropped_until),
                  HINT = format('To replay what is still there, pass since => %L, or since => ''-infinity''.',
                                v_dropped_until);
    END IF;
    -- The events of the window so far; a later one is not part of the replay. The count, for
    -- progress, leaves out dead letters and retries but does not ask the delivery log (a
    -- probe per event above the mark): the worker sends those published when it gets there.
    SELECT s.last_value INTO v_upto FROM outbox.events_seq s;
    SELECT count(*) INTO v_total FROM outbox.events e
     WHERE e.part_at >= v_since AND e.part_at < until AND e.seq <= v_upto
       AND (replay.aggregatetype IS NULL OR e.aggregatetype = replay.aggregatetype)
       AND (replay.type IS NULL OR e.type = replay.type)
       AND (replay.aggregateid IS NULL OR e.aggregateid = replay.aggregateid)
       AND (replay.ids IS NULL OR e.id = ANY (replay.ids))
       AND e.dead_at IS NULL AND (e.published_at IS NOT NULL OR e.next_attempt_at IS NULL);
    INSERT INTO outbox.replays (since, until, aggregatetype, type, aggregateid, ids, upto_seq,
                                events_total, requested_by)
    VALUES (v_since, until, replay.aggregatetype, replay.type, replay.aggregateid, replay.ids,
            v_upto, v_total, session_user)
    RETURNING id INTO v_id;
    RAISE LOG 'outbox: replay % requested by %: % events from % to %', v_id, session_user, v_total, v_since, until;
    PERFORM outbox._replay_requested();
    RETURN v_id;
END
$$;
COMMENT ON FUNCTION outbox.replay(timestamptz, timestamptz, text, text, text, uuid[]) IS
  'Sends the published events of [since, until) again, with their own ids and an outbox-replay header; returns the replay''s id (outbox.replays).';

CREATE FUNCTION outbox.cancel_replay(replay_id bigint)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF replay_id IS NULL THEN
        RAISE EXCEPTION 'outbox.cancel_replay: replay_id must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE outbox.replays r SET state = 'cancelled', finished_at = now(), updated_at = now()
     WHERE r.id = replay_id AND r.state = 'running';
    IF FOUND THEN
        RAISE LOG 'outbox: replay % cancelled by %', replay_id, session_user;
        RETURN true;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM outbox.replays r WHERE r.id = replay_id) THEN
        RAISE EXCEPTION 'outbox.cancel_replay: there is no replay %', replay_id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN false;
END
$$;
COMMENT ON FUNCTION outbox.cancel_replay(bigint) IS
  'Stops a running replay after its current batch; false if it had already ended.';

REVOKE ALL ON FUNCTION outbox._replay_requested() FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.replay(timestamptz, timestamptz, text, text, text, uuid[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.cancel_replay(bigint) FROM PUBLIC;
REVOKE ALL ON outbox.replays FROM PUBLIC;
GRANT SELECT ON outbox.replays TO pg_monitor;

-- DROP EXTENSION outbox (and DROP SCHEMA outbox CASCADE) would delete the events the relay
-- has not delivered: refused unless outbox.drop_discards_events is on. It also takes the
-- events table's lock first, the order the relay takes its locks in, so the drop never
-- deadlocks with the relay, and tells the relay to forget its sink at commit.
CREATE FUNCTION outbox._drop_guard()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'outbox_drop_guard'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;
CREATE EVENT TRIGGER outbox_drop_guard ON ddl_command_start
    WHEN TAG IN ('DROP EXTENSION', 'DROP SCHEMA')
    EXECUTE FUNCTION outbox._drop_guard();

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

-- Least privilege: nothing is callable by PUBLIC, and nobody but the owner creates in the
-- schema. See docs/security.md for the GRANTs of each role.
REVOKE ALL ON SCHEMA outbox FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.enqueue(text, text, text, jsonb, jsonb, uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.enqueue_batch(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._next_seq(regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.rotate() FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._partition_settings() FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._create_partition(timestamptz, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._create_partitions(timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._create_partition_indexes(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._bucket_start(timestamptz, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._check_sink(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._notify_relay() FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.configure_sink(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.unconfigure_sink() FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._workers() FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.requeue(uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._drop_guard() FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.shard_of(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._claim_shards(int4[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._release_shards(int4[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.version() FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA outbox FROM PUBLIC;
REVOKE ALL ON SEQUENCE outbox.events_seq FROM PUBLIC;
-- Monitoring roles see the relay's state and lag, not events nor the sink configuration.
GRANT USAGE ON SCHEMA outbox TO pg_monitor;
GRANT SELECT ON outbox.status TO pg_monitor;
GRANT EXECUTE ON FUNCTION outbox._workers() TO pg_monitor;
GRANT EXECUTE ON FUNCTION outbox.version() TO pg_monitor;

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
       w.detail, w.shards,
       (w.last_error_at IS NOT NULL
        AND (w.last_success_at IS NULL
             OR w.last_error_at OPERATOR(pg_catalog.>) w.last_success_at)) AS last_error_current
  FROM outbox._cluster_workers() w;
COMMENT ON VIEW outbox.cluster_status IS
  'One row per relay worker of every database of the cluster (running or not, and why); the queue''s lag is in each database''s outbox.status.';
REVOKE ALL ON outbox.cluster_status FROM PUBLIC;
GRANT SELECT ON outbox.cluster_status TO pg_monitor;

-- Metrics (docs/monitoring.md). The relay's cumulative statistics live in shared memory:
-- they never go backwards while the server runs, relay restarts included, and start from 0
-- when it starts. The views give them with this database's name, under the names
-- Prometheus sees (outbox.metrics() and monitoring/postgres_exporter.yml): a pg_monitor
-- role reads them all.
CREATE FUNCTION outbox._sink_stats(
    OUT sink text, OUT events_sent bigint, OUT events_failed bigint,
    OUT events_rejected bigint, OUT events_dead_lettered bigint, OUT batches bigint,
    OUT bytes_sent bigint, OUT backoffs bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'outbox_sink_stats'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION outbox._histograms(
    OUT sink text, OUT histogram text, OUT le float8[], OUT bucket bigint[], OUT sum float8,
    OUT count bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'outbox_histograms'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION outbox._database_stats(
    OUT relay_starts bigint, OUT relay_exits_clean bigint, OUT relay_exits_error bigint,
    OUT relay_exits_lost bigint, OUT events_requeued bigint, OUT sealed_floor timestamptz,
    OUT relays_running int, OUT relays_wanted int, OUT worker_cap_reached boolean)
RETURNS record
AS 'MODULE_PATHNAME', 'outbox_database_stats'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION outbox._count_requeued(events bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_count_requeued'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;

-- Per sink: what the relays sent with it since the server started.
CREATE VIEW outbox.sink_metrics AS
SELECT pg_catalog.current_database()::pg_catalog.text AS datname, s.sink,
       s.events_sent AS events_sent_total, s.events_failed AS events_failed_total,
       s.events_rejected AS events_rejected_total,
       s.events_dead_lettered AS events_dead_lettered_total, s.batches AS batches_total,
       s.bytes_sent AS bytes_sent_total, s.backoffs AS backoffs_total
  FROM outbox._sink_stats() s;
COMMENT ON VIEW outbox.sink_metrics IS
  'Per sink, since the server started: events acknowledged, failed (transient), rejected, dead-lettered; batches, payload and header bytes acknowledged, back-offs.';

-- Per sink, three histograms: le holds the upper bounds (+Inf left out: it is count), bucket
-- the cumulative counts at each.
CREATE VIEW outbox.histogram_metrics AS
SELECT pg_catalog.current_database()::pg_catalog.text AS datname, h.sink, h.histogram, h.le,
       h.bucket, h.sum, h.count
  FROM outbox._histograms() h;
COMMENT ON VIEW outbox.histogram_metrics IS
  'Per sink: delivery_latency_seconds (each event, enqueue to acknowledgement), batch_round_trip_seconds and batch_size_events (each batch); cumulative buckets.';

-- Per relay worker: outbox.status's counters (they go on across the relay's restarts), and
-- whether its last error is current (no event acknowledged since).
CREATE VIEW outbox.relay_metrics AS
SELECT w.datname, w.worker, w.state, w.up, w.batches_total, w.events_sent_total,
       w.events_failed_total, w.events_dead_lettered_total, w.seconds_since_last_ack,
       w.last_error_current,
       (w.last_error_current OPERATOR(pg_catalog.=) 1
        AND w.last_error LIKE 'sink configuration error:%')::pg_catalog.int4 AS config_error,
       w.last_error
  FROM (SELECT pg_catalog.current_database()::pg_catalog.text AS datname,
               COALESCE(s.worker::pg_catalog.text, '') AS worker, s.state,
               (s.pid IS NOT NULL)::pg_catalog.int4 AS up,
               COALESCE(s.batches, 0) AS batches_total,
               COALESCE(s.events_sent, 0) AS events_sent_total,
               COALESCE(s.events_failed, 0) AS events_failed_total,
               COALESCE(s.events_dead, 0) AS events_dead_lettered_total,
               pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) s.last_success_at)
                 AS seconds_since_last_ack,
               (s.last_error_at IS NOT NULL
                AND (s.last_success_at IS NULL
                     OR s.last_error_at OPERATOR(pg_catalog.>) s.last_success_at))::pg_catalog.int4
                 AS last_error_current,
               s.last_error
          FROM outbox._workers() s) w;
COMMENT ON VIEW outbox.relay_metrics IS
  'Per relay worker: up, state, counters (never reset by a relay restart), seconds since its last acknowledged event, whether its last error is current, and whether that error is the sink''s configuration.';

-- The database's queue and relays: the gauges, and the relays' starts and exits.
CREATE VIEW outbox.database_metrics AS
SELECT pg_catalog.current_database()::pg_catalog.text AS datname,
       q.unpublished,
       COALESCE(pg_catalog.date_part('epoch', q.oldest_unpublished_age), 0)
         AS oldest_unpublished_age_seconds,
       q.held_keys,
       COALESCE(pg_catalog.date_part('epoch', q.oldest_held_age), 0) AS oldest_held_key_age_seconds,
       q.dead_lettered AS dead_letters,
       p.partitions, p.sealed_partitions,
       COALESCE(pg_catalog.date_part('epoch', p.newest_end OPERATOR(pg_catalog.-) pg_catalog.now()), 0)
         AS partitions_ahead_seconds,
       COALESCE(pg_catalog.date_part('epoch', d.sealed_floor), 0) AS sealed_floor_seconds,
       GREATEST(0, l.handed_out OPERATOR(pg_catalog.+) 1
                   OPERATOR(pg_catalog.-) COALESCE(r.low_water, 0)) AS low_water_lag,
       d.relays_running, d.relays_wanted, d.worker_cap_reached::pg_catalog.int4 AS worker_cap_reached,
       d.relay_starts AS relay_starts_total, d.relay_exits_clean AS relay_exits_clean_total,
       d.relay_exits_error AS relay_exits_error_total, d.relay_exits_lost AS relay_exits_lost_total,
       d.events_requeued AS events_requeued_total,
       rp.replays_running, rp.replay_events_remaining, rp.replay_seconds_since_progress
  FROM (SELECT s.unpublished, s.oldest_unpublished_age, s.held_keys, s.oldest_held_age,
               s.dead_lettered
          FROM outbox.status s LIMIT 1) q
 CROSS JOIN outbox._database_stats() d
 CROSS JOIN LATERAL (
        SELECT pg_catalog.count(*) AS partitions,
               pg_catalog.count(*) FILTER (WHERE pt.upper_bound OPERATOR(pg_catalog.<=) d.sealed_floor)
                 AS sealed_partitions,
               pg_catalog.max(pt.upper_bound) AS newest_end
          FROM outbox.partitions pt) p
 CROSS JOIN (SELECT CASE WHEN sq.is_called THEN sq.last_value
                         ELSE sq.last_value OPERATOR(pg_catalog.-) 1 END AS handed_out
               FROM outbox.events_seq sq) l
 CROSS JOIN (
        SELECT pg_catalog.count(*) AS replays_running,
               COALESCE(pg_catalog.sum(GREATEST(0, rr.events_total OPERATOR(pg_catalog.-) rr.events_sent
                                                OPERATOR(pg_catalog.-) rr.events_skipped)), 0)::pg_catalog.int8
                 AS replay_events_remaining,
               COALESCE(pg_catalog.max(pg_catalog.date_part('epoch',
                                         pg_catalog.now() OPERATOR(pg_catalog.-) rr.updated_at)), 0)
                 AS replay_seconds_since_progress
          FROM outbox.replays rr
         WHERE rr.state OPERATOR(pg_catalog.=) 'running') rp
  LEFT JOIN outbox.relay_state r ON true;
COMMENT ON VIEW outbox.database_metrics IS
  'The database''s queue (unpublished, ages, held keys, dead letters, partitions, the low-water mark''s lag), relays (running, wanted, capped by outbox.max_workers, starts and exits) and running replays (events left, seconds since their last batch).';

-- A label, name="value", escaped as the Prometheus text format wants it. A byte that starts
-- no character of the database's encoding is written as the characters \xHH, and in a
-- SQL_ASCII database (which takes any bytes, and converts nothing for the client) one that
-- starts no UTF-8 character: the exposition is valid UTF-8 (src/core/label_value.hpp).
CREATE FUNCTION outbox._label(name text, value text)
RETURNS text
AS 'MODULE_PATHNAME', 'outbox_label'
LANGUAGE C IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp;

-- Every view above in the Prometheus text exposition format (version 0.0.4), for a scraper
-- that runs SQL (a textfile collector, a sidecar): the same names the exporter's queries file
-- gives.
CREATE FUNCTION outbox.metrics()
RETURNS text
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
WITH
d AS (SELECT * FROM outbox.database_metrics),
dl AS (SELECT outbox._label('datname', d.datname) AS l FROM d),
s AS (SELECT m.*, outbox._label('datname', m.datname) || ',' || outbox._label('sink', m.sink) AS l
        FROM outbox.sink_metrics m),
w AS (SELECT m.*, outbox._label('datname', m.datname) || ',' || outbox._label('worker', m.worker) AS l
        FROM outbox.relay_metrics m),
h AS (SELECT m.*, outbox._label('datname', m.datname) || ',' || outbox._label('sink', m.sink) AS l
        FROM outbox.histogram_metrics m),
samples(family, type, help, sample, grp, extra, value, ord) AS (
  SELECT 'outbox_' || g.name, 'gauge', g.help, 'outbox_' || g.name, dl.l, '', g.value, 0
    FROM d, dl, LATERAL (VALUES
      ('unpublished', 'Events not yet published (nor dead-lettered).', d.unpublished::text),
      ('oldest_unpublished_age_seconds', 'Age of the oldest unpublished event.',
       round(d.oldest_unpublished_age_seconds::numeric, 6)::text),
      ('held_keys', 'Keys whose events wait behind a retrying event.', d.held_keys::text),
      ('oldest_held_key_age_seconds', 'Age of the oldest held key''s event.',
       round(d.oldest_held_key_age_seconds::numeric, 6)::text),
      ('dead_letters', 'Dead-lettered events.', d.dead_letters::text),
      ('partitions', 'Partitions of outbox.events.', d.partitions::text),
      ('sealed_partitions', 'Sealed partitions (no query of the relay reads them).',
       d.sealed_partitions::text),
      ('partitions_ahead_seconds', 'Seconds until the newest partition ends (rotation makes more).',
       round(d.partitions_ahead_seconds::numeric, 3)::text),
      ('sealed_floor_seconds', 'The sealed partitions'' floor, as a Unix time (0: none).',
       round(d.sealed_floor_seconds::numeric, 3)::text),
      ('low_water_lag', 'Sequence values handed out at or above the saved low-water mark.',
       d.low_water_lag::text),
      ('relays_running', 'Relay workers running in this database.', d.relays_running::text),
      ('relays_wanted', 'Relay workers wanted in this database (outbox.workers).',
       d.relays_wanted::text),
      ('worker_cap_reached', '1 while a relay of this database waits for a slot of outbox.max_workers.',
       d.worker_cap_reached::text),
      ('replays_running', 'Replays running (outbox.replays).', d.replays_running::text),
      ('replay_events_remaining', 'Events the running replays have still to send (about).',
       d.replay_events_remaining::text),
      ('replay_seconds_since_progress', 'Seconds since the least recent batch of a running replay (0: none runs).',
       round(d.replay_seconds_since_progress::numeric, 3)::text)) g(name, help, value)
  UNION ALL
  SELECT 'outbox_' || g.name, 'counter', g.help, 'outbox_' || g.name, dl.l, '', g.value, 0
    FROM d, dl, LATERAL (VALUES
      ('relay_starts_total', 'Relay workers started.', d.relay_starts_total::text),
      ('relay_exits_clean_total', 'Relay workers that exited cleanly (stop, pause, no extension).',
       d.relay_exits_clean_total::text),
      ('relay_exits_error_total', 'Relay workers that exited after an error.',
       d.relay_exits_error_total::text),
      ('relay_exits_lost_total', 'Relay workers that exited without saying why (FATAL).',
       d.relay_exits_lost_total::text),
      ('events_requeued_total', 'Events requeued by outbox.requeue() and requeue_dead().',
       d.events_requeued_total::text)) g(name, help, value)
  UNION ALL
  SELECT 'outbox_sink_' || g.name, 'counter', g.help, 'outbox_sink_' || g.name, s.l, '', g.value, 0
    FROM s, LATERAL (VALUES
      ('events_sent_total', 'Events the sink acknowledged.', s.events_sent_total::text),
      ('events_failed_total', 'Events unavailable while others were acknowledged (retried).',
       s.events_failed_total::text),
      ('events_rejected_total', 'Events the sink rejected (an attempt used).',
       s.events_rejected_total::text),
      ('events_dead_lettered_total', 'Events dead-lettered after outbox.max_attempts.',
       s.events_dead_lettered_total::text),
      ('batches_total', 'Batches handed to the sink.', s.batches_total::text),
      ('bytes_sent_total', 'Payload and header bytes of acknowledged events.',
       s.bytes_sent_total::text),
      ('backoffs_total', 'Back-offs of the whole stream (outage, configuration error).',
       s.backoffs_total::text)) g(name, help, value)
  UNION ALL
  SELECT 'outbox_relay_' || g.name, g.type, g.help, 'outbox_relay_' || g.name, w.l, '', g.value, 0
    FROM w, LATERAL (VALUES
      ('up', 'gauge', '1 while the relay worker runs.', w.up::text),
      ('batches_total', 'counter', 'Batches this worker sent.', w.batches_total::text),
      ('events_sent_total', 'counter', 'Events this worker sent.', w.events_sent_total::text),
      ('events_failed_total', 'counter', 'Events this worker saw fail (rejected or transient).',
       w.events_failed_total::text),
      ('events_dead_lettered_total', 'counter', 'Events this worker dead-lettered.',
       w.events_dead_lettered_total::text),
      ('last_error_current', 'gauge', '1 when no event was acknowledged since the last error.',
       w.last_error_current::text),
      ('config_error', 'gauge', '1 when the current error is the sink''s configuration.',
       w.config_error::text)) g(name, type, help, value)
  UNION ALL
  SELECT 'outbox_relay_seconds_since_last_ack', 'gauge',
         'Seconds since this worker''s last acknowledged event.',
         'outbox_relay_seconds_since_last_ack', w.l, '',
         round(w.seconds_since_last_ack::numeric, 3)::text, 0
    FROM w WHERE w.seconds_since_last_ack IS NOT NULL
  UNION ALL
  SELECT 'outbox_relay_state_info', 'gauge', 'The worker''s state, as a label (always 1).',
         'outbox_relay_state_info', w.l, ',' || outbox._label('state', COALESCE(w.state, '')), '1', 0
    FROM w
  UNION ALL
  SELECT 'outbox_' || h.histogram, 'histogram', hh.help, 'outbox_' || h.histogram || '_bucket',
         h.l, ',' || outbox._label('le', b.le::numeric::text), b.bucket::text, b.n
    FROM h, LATERAL unnest(h.le, h.bucket) WITH ORDINALITY b(le, bucket, n),
         LATERAL (SELECT CASE h.histogram
                 WHEN 'delivery_latency_seconds' THEN 'Each event, from its enqueue to the sink''s acknowledgement.'
                 WHEN 'batch_round_trip_seconds' THEN 'Each batch, from handed to the sink to its outcomes.'
                 ELSE 'Events per batch handed to the sink.' END AS help) hh
  UNION ALL
  SELECT 'outbox_' || h.histogram, 'histogram', NULL, 'outbox_' || h.histogram || x.suffix,
         h.l, x.le, x.value, x.ord
    FROM h, LATERAL (VALUES
      ('_bucket', ',' || outbox._label('le', '+Inf'), h.count::text, 1000),
      ('_sum', '', round(h.sum::numeric, 6)::text, 1001),
      ('_count', '', h.count::text, 1002)) x(suffix, le, value, ord)
),
families AS (
  SELECT family, min(type) AS type, min(help) AS help,
         string_agg(sample || '{' || grp || extra || '} ' || value, E'\n' ORDER BY grp, ord)
           AS lines
    FROM samples GROUP BY family)
SELECT COALESCE(string_agg(format(E'# HELP %s %s\n# TYPE %s %s\n%s', family, help, family, type,
                                  lines), E'\n' ORDER BY family) || E'\n', '')
  FROM families
$$;
COMMENT ON FUNCTION outbox.metrics() IS
  'This database''s outbox metrics in the Prometheus text exposition format.';

REVOKE ALL ON FUNCTION outbox._sink_stats() FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._histograms() FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._database_stats() FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._count_requeued(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._label(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.metrics() FROM PUBLIC;
REVOKE ALL ON outbox.sink_metrics, outbox.histogram_metrics, outbox.relay_metrics,
              outbox.database_metrics FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox._sink_stats(), outbox._histograms(), outbox._database_stats(),
                          outbox._label(text, text), outbox.metrics() TO pg_monitor;
GRANT SELECT ON outbox.sink_metrics, outbox.histogram_metrics, outbox.relay_metrics,
                outbox.database_metrics TO pg_monitor;

-- The options a sink declares, from the same table configure_sink checks them against: the
-- built-in sinks' and a third party's (it loads the sink's library, as configure_sink does).
CREATE FUNCTION outbox.sink_options(sink text, OUT option text, OUT kind text,
                                    OUT description text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'outbox_sink_options'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION outbox.sink_options(text) IS
  'The options a sink declares (a secret as <name>_file), with their kind and description.';
REVOKE ALL ON FUNCTION outbox.sink_options(text) FROM PUBLIC;

-- The first partitions, so that enqueue works at once; released from the extension so that
-- rotation can drop them and pg_dump dumps them with their events. A restore from pg_dump
-- brings its own partitions, which ours would collide with: pg_dump's and pg_restore's
-- scripts set row_security = off (this script runs with the caller's value), and then none
-- are made here. Whenever outbox.events has no partition, the first enqueue makes them.
DO $$
DECLARE
    r record;
BEGIN
    IF pg_catalog.current_setting('row_security') OPERATOR(pg_catalog.=) 'off' THEN
        RETURN;
    END IF;
    FOR r IN SELECT * FROM outbox._create_partitions(pg_catalog.clock_timestamp()) LOOP
        EXECUTE pg_catalog.format('ALTER EXTENSION outbox DROP TABLE outbox.%I', r.partition);
    END LOOP;
END
$$;

-- A relay that served an earlier installation in this database forgets it.
SELECT outbox._notify_relay();
