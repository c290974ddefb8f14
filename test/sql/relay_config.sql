-- The relay's SQL surface, without the relay (this server does not preload outbox).

-- Configuring works, and says that no relay will read it here.
SELECT outbox.configure_sink('null');
SELECT sink, options FROM outbox.sink_config;
SELECT outbox.configure_sink('null', '{"fail_every": 3}');
SELECT sink, options FROM outbox.sink_config;

-- Refused: unknown sink, a path, bad options, options that are not an object of scalars.
SELECT regress.try($$SELECT outbox.configure_sink('nope')$$);
SELECT regress.try($$SELECT outbox.configure_sink('../../../tmp/evil')$$);
SELECT regress.try($$SELECT outbox.configure_sink('null', '{"bogus": 1}')$$);
SELECT regress.try($$SELECT outbox.configure_sink('null', '[1]')$$);
SELECT regress.try($$SELECT outbox.configure_sink('null', '{"fail_every": {"a": 1}}')$$);
SELECT regress.try($$SELECT outbox.configure_sink('kafka', '{}')$$);
SELECT regress.try($$SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "127.0.0.1:1", "acks": "1"}')$$);
SELECT regress.try($$SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "127.0.0.1:1", "no.such.property": "x"}')$$);
SELECT regress.try($$SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "127.0.0.1:1", "topic.template": "t.${nope}"}')$$);
SELECT regress.try($$SELECT outbox.configure_sink(NULL)$$);
-- The stored configuration is the last good one.
SELECT sink, options FROM outbox.sink_config;

-- configure_sink is no door to the operating system: an option that runs a command, loads
-- code, or names a file outside outbox.sink_files_directory is refused (one per class).
SELECT regress.try($$SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "127.0.0.1:1", "sasl.kerberos.kinit.cmd": "touch /tmp/outbox-pwned"}')$$);
SELECT regress.try($$SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "127.0.0.1:1", "plugin.library.paths": "/tmp/evil.so"}')$$);
SELECT regress.try($$SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "127.0.0.1:1", "ssl.engine.location": "/tmp/evil.so"}')$$);
SELECT regress.try($$SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "127.0.0.1:1", "ssl.ca.location": "/etc/passwd"}')$$);
SELECT regress.try($$SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "127.0.0.1:1", "test.mock.num.brokers": "1"}')$$);
-- A secret is never taken inline, and the error does not repeat it.
SELECT regress.try($$SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "127.0.0.1:1", "sasl.password": "hunter2"}')$$);
-- Without outbox.sink_files_directory no option may name a file or a secret file
-- (test/t/018_secrets.pl configures one with secrets from files).
SELECT regress.try($$SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "127.0.0.1:1", "sasl.password_file": "kafka.password"}')$$);
-- A sink whose message limit is below what enqueue accepts is accepted with a WARNING.
SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "127.0.0.1:1", "message.max.bytes": "100000"}') IS NOT NULL AS configured;
SELECT outbox.configure_sink('null');

-- outbox.status: no worker rows here, but the lag is always there.
SELECT outbox.enqueue('order', 's1', 'OrderCreated', '{}') IS NOT NULL AS enqueued;
SELECT worker, state, unpublished, oldest_unpublished_age IS NOT NULL AS has_age, dead_lettered, database, detail FROM outbox.status;

-- Dead letters and requeue.
UPDATE outbox.events SET dead_at = now(), attempts = 10, last_error = 'too large' WHERE aggregateid = 's1';
SELECT aggregateid, attempts, last_error FROM outbox.dead_letters;
SELECT unpublished, dead_lettered FROM outbox.status;
SELECT outbox.requeue(id) FROM outbox.events WHERE aggregateid = 's1';
SELECT outbox.requeue('00000000-0000-0000-0000-000000000001') AS unknown_id;
SELECT attempts, dead_at, next_attempt_at FROM outbox.events WHERE aggregateid = 's1';
UPDATE outbox.events SET dead_at = now() WHERE aggregateid = 's1';
SELECT outbox.requeue_dead() AS requeued;
SELECT count(*) AS dead FROM outbox.dead_letters;

-- Unconfiguring removes the sink (the relay stops sending); a second call finds none.
SELECT outbox.unconfigure_sink() AS removed;
SELECT count(*) AS configured FROM outbox.sink_config;
SELECT outbox.unconfigure_sink() AS removed;

-- A sink's declared options, from the table configure_sink checks against.
SELECT option, kind FROM outbox.sink_options('null') ORDER BY 1;
SELECT option FROM outbox.sink_options('http') WHERE kind = 'secret';
\set VERBOSITY terse
SELECT * FROM outbox.sink_options('no_such_sink');
SELECT * FROM outbox.sink_options('Not A Name');
\set VERBOSITY default
