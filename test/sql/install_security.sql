-- CREATE EXTENSION and ALTER EXTENSION UPDATE never run what another role planted (the
-- CVE-2022-2625 / CVE-2023-39417 class). mallory has CREATE on the database, nothing more;
-- every trap below would make mallory a superuser if a script ran it.
\set VERBOSITY terse
SELECT current_database() AS regress_db \gset
CREATE DATABASE outbox_install_security;
\c outbox_install_security
CREATE ROLE mallory LOGIN;
GRANT CREATE ON DATABASE outbox_install_security TO mallory;
CREATE FUNCTION public.mallory_is_superuser() RETURNS boolean LANGUAGE sql
  AS $$ SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory' $$;

-- 1. A schema "outbox" made by mallory beforehand: refused.
SET ROLE mallory;
CREATE SCHEMA outbox;
RESET ROLE;
CREATE EXTENSION outbox;

-- 2. The same schema holding a look-alike function (text where the scripts pass an untyped
--    literal), an overload of format() and an operator, each of which escalates: refused,
--    and none of them ran.
SET ROLE mallory;
CREATE FUNCTION outbox.escalate() RETURNS void LANGUAGE plpgsql
  AS $$ BEGIN EXECUTE 'ALTER ROLE mallory SUPERUSER'; END $$;
CREATE FUNCTION outbox.nextval(text) RETURNS bigint LANGUAGE plpgsql
  AS $$ BEGIN PERFORM outbox.escalate(); RETURN 1; END $$;
CREATE FUNCTION outbox.format(text, text) RETURNS text LANGUAGE plpgsql
  AS $$ BEGIN PERFORM outbox.escalate(); RETURN $1; END $$;
CREATE FUNCTION outbox.trap_eq(name, text) RETURNS boolean LANGUAGE plpgsql
  AS $$ BEGIN PERFORM outbox.escalate(); RETURN $1::text = $2; END $$;
CREATE OPERATOR outbox.= (LEFTARG = name, RIGHTARG = text, FUNCTION = outbox.trap_eq);
RESET ROLE;
CREATE EXTENSION outbox;
SELECT mallory_is_superuser();

-- 3. A schema owned by a superuser in which mallory may create: refused.
DROP SCHEMA outbox CASCADE;
CREATE SCHEMA outbox;
GRANT CREATE ON SCHEMA outbox TO mallory;
CREATE EXTENSION outbox;
GRANT CREATE ON SCHEMA outbox TO PUBLIC;
REVOKE CREATE ON SCHEMA outbox FROM mallory;
CREATE EXTENSION outbox;
REVOKE CREATE ON SCHEMA outbox FROM PUBLIC;

-- 4. An empty schema owned by a superuser, as a restore from pg_dump makes it: accepted.
CREATE EXTENSION outbox;
SELECT extversion FROM pg_extension WHERE extname = 'outbox';

-- 5. After the install, only the owner creates in the schema or drops its partitions, even
--    for a role with USAGE on it (as an application role has).
GRANT USAGE ON SCHEMA outbox TO mallory;
SELECT format('DROP TABLE outbox.%I', name) AS drop_partition,
       format('ALTER TABLE outbox.events DETACH PARTITION outbox.%I', name) AS detach_partition
  FROM outbox.partitions ORDER BY lower_bound LIMIT 1 \gset
SET ROLE mallory;
CREATE TABLE outbox.planted (i int);
CREATE FUNCTION outbox.nextval(text) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint';
-- (the SQLSTATE only: the partition's name is the day's)
\set VERBOSITY sqlstate
:drop_partition;
:detach_partition;
\set VERBOSITY terse
RESET ROLE;
SELECT count(*) AS partitions_attached FROM pg_inherits WHERE inhparent = 'outbox.events'::regclass;
REVOKE USAGE ON SCHEMA outbox FROM mallory;
DROP EXTENSION outbox;
DROP SCHEMA outbox;

-- 6. An installation from before 0.4.0 whose schema mallory came to control (as when it was
--    made by mallory before CREATE EXTENSION, which 0.3.0 allowed), with the traps planted:
--    every update script refuses it, and none of the traps ran.
CREATE EXTENSION outbox VERSION '0.1.0';
ALTER SCHEMA outbox OWNER TO mallory;
SET ROLE mallory;
CREATE FUNCTION outbox.escalate() RETURNS void LANGUAGE plpgsql
  AS $$ BEGIN EXECUTE 'ALTER ROLE mallory SUPERUSER'; END $$;
CREATE FUNCTION outbox.format(text, text) RETURNS text LANGUAGE plpgsql
  AS $$ BEGIN PERFORM outbox.escalate(); RETURN $1; END $$;
RESET ROLE;
ALTER EXTENSION outbox UPDATE TO '0.2.0';
ALTER EXTENSION outbox UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'outbox';
SELECT mallory_is_superuser();
-- The way out the hint gives: the schema back to a superuser, mallory's objects gone.
ALTER SCHEMA outbox OWNER TO CURRENT_USER;
DROP FUNCTION outbox.format(text, text);
ALTER EXTENSION outbox UPDATE;
ALTER FUNCTION outbox.escalate() OWNER TO CURRENT_USER;
ALTER EXTENSION outbox UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'outbox';
SET outbox.drop_discards_events = on;
DROP EXTENSION outbox;
DROP SCHEMA outbox CASCADE;

-- 7. Every statement the scripts run names its pg_catalog functions and operators. A
--    superuser-owned schema (which passes the check) full of traps that raise when called:
--    look-alikes, with text arguments, of every function name the scripts use, and
--    operators on the argument types the scripts compare. Installing 0.4.0, and updating
--    0.1.0 along the whole chain, calls none of them.
CREATE SCHEMA outbox;
DO $$
DECLARE
    f text;
    args text;
    op text;
    types text;
BEGIN
    FOREACH f IN ARRAY ARRAY['aclexplode', 'cardinality', 'clock_timestamp', 'count',
        'current_database', 'current_setting', 'extract', 'floor', 'format', 'hashtext',
        'least', 'make_interval', 'max', 'min', 'nextval', 'now', 'pg_extension_config_dump',
        'pg_try_advisory_xact_lock', 'quote_ident', 'set_config', 'to_char', 'to_regclass',
        'to_timestamp'] LOOP
        FOREACH args IN ARRAY ARRAY['text', 'text, text', 'text, text, text', 'VARIADIC text[]'] LOOP
            EXECUTE format('CREATE FUNCTION outbox.%I(%s) RETURNS text LANGUAGE plpgsql AS %L',
                           f, args, format('BEGIN RAISE EXCEPTION ''trap %s(%s) was called''; END', f, args));
        END LOOP;
    END LOOP;
    FOREACH types IN ARRAY ARRAY['name', 'oid', 'bigint', 'integer', 'timestamptz', 'xid'] LOOP
        EXECUTE format('CREATE FUNCTION outbox.%I(%s, text) RETURNS boolean LANGUAGE plpgsql AS %L',
                       'trap_' || types, types,
                       format('BEGIN RAISE EXCEPTION ''trap operator on %s was called''; END', types));
        FOREACH op IN ARRAY ARRAY['=', '<>', '<', '<=', '>', '>=', '+', '-'] LOOP
            EXECUTE format('CREATE OPERATOR outbox.%s (LEFTARG = %s, RIGHTARG = text, FUNCTION = outbox.%I)',
                           op, types, 'trap_' || types);
        END LOOP;
    END LOOP;
END
$$;
-- The traps are live: an unqualified call finds them.
SET search_path = outbox, public;
SELECT format('%s', 'x'::text);
SELECT now('x');
SELECT 1::bigint = 'x'::text;
RESET search_path;
CREATE EXTENSION outbox;
SELECT count(*) > 0 AS works FROM outbox.status;
SET outbox.drop_discards_events = on;
DROP EXTENSION outbox;
CREATE EXTENSION outbox VERSION '0.1.0';
ALTER EXTENSION outbox UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'outbox';
SELECT outbox.enqueue('order', '1', 'OrderCreated', '{}') IS NOT NULL AS enqueued;
SELECT count(*) >= 0 AS rotated FROM outbox.rotate();
DROP EXTENSION outbox;
RESET outbox.drop_discards_events;
DROP SCHEMA outbox CASCADE;

\c :regress_db
DROP DATABASE outbox_install_security;
DROP ROLE mallory;
