\echo Use "ALTER EXTENSION outbox UPDATE TO '0.3.0'" to load this file. \quit

-- 0.3.0: outbox.unconfigure_sink(), to stop the relay sending without a server restart
-- (pg_terminate_backend() on a relay stops it until the server restarts).

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
REVOKE ALL ON FUNCTION outbox.unconfigure_sink() FROM PUBLIC;
