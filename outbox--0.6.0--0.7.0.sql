\echo Use "ALTER EXTENSION outbox UPDATE TO '0.7.0'" to load this file. \quit

-- outbox 0.6.0 -> 0.7.0. Each section below carries one change; outbox--0.7.0.sql holds the
-- same objects as a fresh install makes them (TAP 025 compares the two catalogs).

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

-- ---------------------------------------------------------------------------------------
-- status: whether last_error is current
-- ---------------------------------------------------------------------------------------

-- last_error stays for diagnosis; last_error_current, added at the end of both views, says
-- whether it still holds: no event was acknowledged since (relay_metrics' test). CREATE OR
-- REPLACE VIEW keeps their grants and comments.
CREATE OR REPLACE VIEW outbox.status AS
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

CREATE OR REPLACE VIEW outbox.cluster_status AS
SELECT w.database, w.worker, w.pid, w.state, w.sink, w.batches, w.events_sent, w.events_failed,
       w.events_dead, w.last_error, w.last_error_at, w.last_success_at, w.backoff_until,
       w.detail, w.shards,
       (w.last_error_at IS NOT NULL
        AND (w.last_success_at IS NULL
             OR w.last_error_at OPERATOR(pg_catalog.>) w.last_success_at)) AS last_error_current
  FROM outbox._cluster_workers() w;

-- ---------------------------------------------------------------------------------------
-- replay: a window before the oldest partition
-- ---------------------------------------------------------------------------------------

-- What rotation dropped, recorded from now on (outbox.rotate(), in the section on rotation
-- below; replay() in the section on filters). Whether 0.6.0 dropped anything is not known:
-- the oldest partition's start stands for it.
-- Since when outbox.events holds every event it was given: the upper bound of the newest
-- partition rotation has dropped (no row: it has dropped none). replay() refuses only a
-- window that starts before it. Dumped: a restore keeps what was lost before it.
CREATE TABLE outbox.retained_since (
    singleton pg_catalog.bool        PRIMARY KEY DEFAULT true CHECK (singleton),
    since     pg_catalog.timestamptz NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('outbox.retained_since'::pg_catalog.regclass, '');
REVOKE ALL ON outbox.retained_since FROM PUBLIC;
INSERT INTO outbox.retained_since (since)
SELECT min(q.lower_bound) FROM outbox.partitions q HAVING min(q.lower_bound) IS NOT NULL;

-- ---------------------------------------------------------------------------------------
-- rotation: every lock bounded, the inbox rotated apart from the events
-- ---------------------------------------------------------------------------------------

-- Every lock rotation takes waits at most outbox.rotate_lock_timeout; rotate() rotates the
-- inbox first, so that it never waits for the inbox's locks while holding the events'.
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

CREATE OR REPLACE FUNCTION outbox._lock_to_drop(p_table regclass, p_timeout_ms integer)
RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT outbox._lock_for_rotation(p_table, 'ACCESS EXCLUSIVE', p_timeout_ms, 'dropping old partitions')
$$;

CREATE OR REPLACE FUNCTION outbox._rotate_events()
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

CREATE OR REPLACE FUNCTION outbox.rotate_inbox()
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

CREATE OR REPLACE FUNCTION outbox.rotate()
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


-- ---------------------------------------------------------------------------------------
-- inbox: consumer names bound to roles
-- ---------------------------------------------------------------------------------------

-- inbox_receive checks the name against the calling role, so it no longer runs as its
-- owner as a whole (src/pg/inbox.cpp switches for the inbox's work).
ALTER FUNCTION outbox.inbox_receive(pg_catalog.text, pg_catalog.uuid, pg_catalog.timestamptz)
    SECURITY INVOKER;

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

-- ---------------------------------------------------------------------------------------
-- metrics: label values valid UTF-8 in any database encoding
-- ---------------------------------------------------------------------------------------

-- A label, name="value", escaped as the Prometheus text format wants it. A byte that starts
-- no character of the database's encoding is written as the characters \xHH, and in a
-- SQL_ASCII database (which takes any bytes, and converts nothing for the client) one that
-- starts no UTF-8 character: the exposition is valid UTF-8 (src/core/label_value.hpp).
CREATE OR REPLACE FUNCTION outbox._label(name text, value text)
RETURNS text
AS 'MODULE_PATHNAME', 'outbox_label'
LANGUAGE C IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp;

-- ---------------------------------------------------------------------------------------
-- replay and dead letters: filters checked, the log line bounded
-- ---------------------------------------------------------------------------------------

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

CREATE OR REPLACE FUNCTION outbox._act_on_dead(p_action text, p_aggregatetype text, p_type text,
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

CREATE OR REPLACE FUNCTION outbox.replay(since timestamptz, until timestamptz,
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
REVOKE ALL ON FUNCTION outbox._check_filters(text, text, text, text, text) FROM PUBLIC;

-- ---------------------------------------------------------------------------------------
-- launcher and replay worker
-- ---------------------------------------------------------------------------------------
