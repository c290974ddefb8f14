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

-- ---------------------------------------------------------------------------------------
-- replay: a window before the oldest partition
-- ---------------------------------------------------------------------------------------

-- ---------------------------------------------------------------------------------------
-- rotation: every lock bounded, the inbox rotated apart from the events
-- ---------------------------------------------------------------------------------------

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

-- inbox_receive's rules for a consumer name: 22004, 22023 or 22001, as it raises them.
CREATE FUNCTION outbox._check_inbox_consumer(consumer pg_catalog.text)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_check_inbox_consumer'
LANGUAGE C IMMUTABLE
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION outbox.bind_inbox_consumer(consumer pg_catalog.text, role pg_catalog.regrole)
RETURNS pg_catalog.bool
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM outbox._check_inbox_consumer(consumer);
    IF role IS NULL THEN
        RAISE EXCEPTION 'outbox.bind_inbox_consumer: role must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
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
    IF consumer IS NULL OR role IS NULL THEN
        RAISE EXCEPTION 'outbox.unbind_inbox_consumer: consumer and role must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    DELETE FROM outbox.inbox_consumers c
     WHERE c.consumer = unbind_inbox_consumer.consumer AND c.role = unbind_inbox_consumer.role;
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION outbox.unbind_inbox_consumer(pg_catalog.text, pg_catalog.regrole) IS
  'Removes a binding of a consumer name to a role; a name left with none is open to every role granted inbox_receive again (unless outbox.inbox_require_binding). True if there was one.';
REVOKE ALL ON FUNCTION outbox._inbox_consumers_changed() FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox._check_inbox_consumer(pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.bind_inbox_consumer(pg_catalog.text, pg_catalog.regrole) FROM PUBLIC;
REVOKE ALL ON FUNCTION outbox.unbind_inbox_consumer(pg_catalog.text, pg_catalog.regrole) FROM PUBLIC;
REVOKE ALL ON outbox.inbox_consumers FROM PUBLIC;

-- ---------------------------------------------------------------------------------------
-- metrics: label values valid UTF-8 in any database encoding
-- ---------------------------------------------------------------------------------------

-- ---------------------------------------------------------------------------------------
-- launcher and replay worker
-- ---------------------------------------------------------------------------------------
