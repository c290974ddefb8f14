\echo Use "ALTER EXTENSION outbox UPDATE TO '0.5.0'" to load this file. \quit

-- outbox 0.4.0 -> 0.5.0: per-key order with several relay workers (shards, their marks and
-- their owners), and outbox.status's shards column.

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

DROP VIEW outbox.status;
DROP FUNCTION outbox._workers();
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
-- above the relay's low-water mark and the retries: it costs what the backlog costs.
CREATE VIEW outbox.status AS
SELECT w.worker, w.pid, w.state, w.sink, w.batches, w.events_sent, w.events_failed,
       w.events_dead, w.last_error, w.last_error_at, w.last_success_at, w.backoff_until,
       q.unpublished, q.oldest_unpublished_age, d.dead_lettered, w.database, w.detail,
       w.shards
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
COMMENT ON VIEW outbox.status IS
  'One row per relay worker (running or not, and why), with the queue''s lag: unpublished events and the age of the oldest.';
REVOKE ALL ON FUNCTION outbox._workers() FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.shard_of(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._claim_shards(int4[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._release_shards(int4[]) FROM PUBLIC;
REVOKE ALL ON outbox.relay_shards FROM PUBLIC;
GRANT SELECT ON outbox.status TO pg_monitor;
GRANT EXECUTE ON FUNCTION outbox._workers() TO pg_monitor;

-- The relay reads the marks per shard from now on.
SELECT outbox._notify_relay();
