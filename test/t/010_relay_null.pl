# The relay with the null sink: delivery, wake at commit, the late-commit trap, dead letters,
# status, reload. Event ids are compared as sets.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $node = relay_node('relay', qq{
outbox.retry_backoff_min = '10ms'
outbox.retry_backoff_max = '200ms'
});
$node->safe_psql('postgres', 'CREATE EXTENSION outbox;');

# 18 lists the loaded libraries, with the name and version of their magic block
# (src/pg/pg_compat.hpp): the library's version is the extension's default version.
SKIP: {
	skip 'pg_get_loaded_modules() came with PostgreSQL 18', 1 if $node->pg_version < 18;
	my ($control_version) = slurp_file($node->config_data('--sharedir') . '/extension/outbox.control')
	  =~ /^default_version = '(.*)'$/m;
	is($node->safe_psql('postgres', q{SELECT module_name || ' ' || version FROM pg_get_loaded_modules()
		WHERE file_name = 'outbox.so'}), "outbox $control_version", "the library's magic block names it and its version");
}

# Before a sink is configured the relay waits, and says so.
ok($node->poll_query_until('postgres', q{SELECT state = 'unconfigured' FROM outbox.status}),
	'an unconfigured relay says so in outbox.status');
my $pg_monitor = $node->safe_psql('postgres',
	q{CREATE ROLE watcher LOGIN IN ROLE pg_monitor; SET ROLE watcher; SELECT count(*) FROM outbox.status});
is($pg_monitor, '1', 'pg_monitor can read outbox.status');
my ($rc, $out, $err) = $node->psql('postgres',
	q{SET ROLE watcher; SELECT * FROM outbox.sink_config});
like($err, qr/permission denied/, 'pg_monitor cannot read the sink configuration');

is($node->safe_psql('postgres', q{SELECT outbox.configure_sink('null')}), 'null', 'configure the null sink');

# Delivery: every committed event is published; rolled-back ones never exist.
my @enqueued;
for my $i (1 .. 50) {
	push @enqueued, $node->safe_psql('postgres', qq{SELECT outbox.enqueue('order', '$i', 'OrderCreated', '{}')});
}
$node->safe_psql('postgres', q{BEGIN; SELECT outbox.enqueue('order', 'rb', 'OrderCreated', '{}'); ROLLBACK;});
wait_published($node, 'true', 'all committed events published');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE published_at IS NOT NULL}),
	[ sort @enqueued ], 'the published ids are exactly the enqueued ids');

# The trap: a transaction that enqueued early and commits late must still be delivered.
my ($late, $late_id) = enqueue_in_open_transaction($node, 'order', 'late', 'OrderCreated');
my @after;
for my $i (1 .. 20) {
	push @after, $node->safe_psql('postgres', qq{SELECT outbox.enqueue('order', 'after$i', 'OrderCreated', '{}')});
}
wait_published($node, q{aggregateid LIKE 'after%'}, 'later transactions are delivered while the early one is open');
my ($late_seq, $max_seq) = split /\|/, $node->safe_psql('postgres',
	qq{SELECT (SELECT seq FROM outbox.events WHERE aggregateid LIKE 'after%' ORDER BY seq LIMIT 1), max(seq) FROM outbox.events});
$late->query_safe('COMMIT');
$late->quit;
wait_published($node, q{aggregateid = 'late'}, 'the late commit is delivered too');
is($node->safe_psql('postgres', q{SELECT count(*) FROM outbox.event_status WHERE aggregateid = 'late' AND published_at IS NOT NULL}),
	'1', 'exactly the late event');
ok($node->safe_psql('postgres', q{SELECT seq FROM outbox.events WHERE aggregateid = 'late'}) < $late_seq,
	'its seq is below events that were published before it (the id > last_id relay would lose it)');

# Wake at commit: with the fallback poll at one hour, a commit is still delivered, well
# within the test's deadline (three minutes by default). The relay reads the hour when it
# starts; once it has nothing left to do and waits, only the commit can wake it.
$node->safe_psql('postgres', q{ALTER SYSTEM SET outbox.poll_interval = '1h'});
$node->restart;
wait_relay_idle($node, 'restarted with the poll at an hour, the relay waits');
$node->safe_psql('postgres', q{SELECT outbox.enqueue('order', 'wake', 'OrderCreated', '{}')});
wait_published($node, q{aggregateid = 'wake'}, 'woken at commit, not by the poll');

# Dead letters: a sink that rejects every message. After max_attempts the event is kept and
# visible; requeue sends it again. (That neighbours keep flowing past a rejected event is
# shown with Kafka's size limit in 011_relay_kafka.pl.)
$node->safe_psql('postgres', q{ALTER SYSTEM SET outbox.poll_interval = '200ms'; ALTER SYSTEM SET outbox.max_attempts = 3;
	SELECT pg_reload_conf();});
wait_relay_reloaded($node, { 'outbox.poll_interval' => 200, 'outbox.max_attempts' => 3 },
	'the relay has read max_attempts = 3');
$node->safe_psql('postgres', q{SELECT outbox.configure_sink('null', '{"fail_every": 1}')});
my @mixed;
for my $i (1 .. 10) {
	push @mixed, $node->safe_psql('postgres', qq{SELECT outbox.enqueue('mixed', '$i', 'T', '{}')});
}
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM outbox.event_status WHERE aggregatetype = 'mixed' AND published_at IS NULL AND dead_at IS NULL}),
	'every event is either published or dead-lettered');
my $dead = $node->safe_psql('postgres', q{SELECT count(*) FROM outbox.dead_letters});
is($dead, 10, 'all rejected events are dead-lettered');
is($node->safe_psql('postgres', q{SELECT bool_and(attempts = 3 AND last_error IS NOT NULL) FROM outbox.dead_letters}),
	't', 'a dead letter records its attempts and last error');
ok($node->safe_psql('postgres', q{SELECT events_dead FROM outbox.status}) >= $dead, 'status counts dead letters');
is($node->safe_psql('postgres', q{SELECT dead_lettered FROM outbox.status}), $dead, 'status shows them');
$node->safe_psql('postgres', q{SELECT outbox.configure_sink('null')});
is($node->safe_psql('postgres', q{SELECT outbox.requeue_dead()}), $dead, 'requeue_dead requeues them all');
wait_published($node, q{aggregatetype = 'mixed'}, 'requeued events are delivered');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE aggregatetype = 'mixed' AND published_at IS NOT NULL}),
	[ sort @mixed ], 'every mixed event is published in the end');

# A sink that throws (as a buggy sink would): the relay backs off and retries, every event
# is delivered, and the server is not restarted.
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
$node->safe_psql('postgres', q{SELECT outbox.configure_sink('null', '{"throw_every": 2}')});
my @thrown;
for my $i (1 .. 10) {
	push @thrown, $node->safe_psql('postgres', qq{SELECT outbox.enqueue('thrown', '$i', 'T', '{}')});
}
wait_published($node, q{aggregatetype = 'thrown'}, 'a throwing sink: all delivered after retries');
like($node->safe_psql('postgres', q{SELECT last_error FROM outbox.status}), qr/null sink threw/,
	'a throwing sink: the error is reported');
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started,
	'a throwing sink: the server was not restarted');
$node->safe_psql('postgres', q{SELECT outbox.configure_sink('null')});

# Pipelining: while batches come full, a transaction sends up to 8 of them, each fetched and
# started before the one before it is marked. At batch_size 7 a backlog of 300 events (one
# commit: the relay sees all of them at once) is 43 batches: five transactions of 8 full
# batches (56 events), then one of three batches (7, 7 and 6 events: the last is not full).
# Each batch is one row of the delivery log; the rows one transaction wrote share its xmin.
$node->safe_psql('postgres', q{ALTER SYSTEM SET outbox.batch_size = 7; ALTER SYSTEM SET outbox.max_attempts = 100;
	SELECT pg_reload_conf();});
wait_relay_reloaded($node, { 'outbox.batch_size' => 7, 'outbox.max_attempts' => 100 },
	'the relay has read batch_size = 7');
$node->safe_psql('postgres', q{SELECT outbox.configure_sink('null')});
my $piped = ids($node,
	q{SELECT outbox.enqueue('piped', (g % 10)::text, 'P', '{}') FROM generate_series(1, 300) g});
wait_published($node, q{aggregatetype = 'piped'}, 'pipelined: all delivered');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE aggregatetype = 'piped' AND published_at IS NOT NULL}),
	$piped, 'pipelined: the published ids are the enqueued ids');
is( $node->safe_psql('postgres', q{
		WITH d AS MATERIALIZED (SELECT xmin::text AS x, ctid, seqs FROM outbox.deliveries)
		SELECT string_agg(n::text, ',' ORDER BY n) FROM (
		  SELECT count(*) AS n FROM outbox.events e JOIN d ON d.seqs @> e.seq
		   WHERE e.aggregatetype = 'piped' GROUP BY d.x) t}),
	'20,56,56,56,56,56', 'pipelined: events recorded per transaction');
is( $node->safe_psql('postgres', q{
		WITH d AS MATERIALIZED (SELECT ctid, seqs FROM outbox.deliveries)
		SELECT max(n) FROM (
		  SELECT count(*) AS n FROM outbox.events e JOIN d ON d.seqs @> e.seq
		   WHERE e.aggregatetype = 'piped' GROUP BY d.ctid) t}),
	'7', 'pipelined: 7 at most per batch (a row of the delivery log)');

# outbox.batch_max_bytes ends a batch at that many bytes of payload: 30 events of ~400 bytes
# at 1024 take at least 10 batches; an event larger than the limit goes alone.
$node->safe_psql('postgres', q{ALTER SYSTEM SET outbox.batch_max_bytes = 1024; SELECT pg_reload_conf();});
wait_relay_reloaded($node, { 'outbox.batch_max_bytes' => 1024 }, 'the relay has read batch_max_bytes = 1024');
my $batches_before = $node->safe_psql('postgres', q{SELECT batches FROM outbox.status});
my $sized = ids($node, q{SELECT outbox.enqueue('sized', g::text, 'S', jsonb_build_object('pad', repeat('x', CASE WHEN g = 15 THEN 5000 ELSE 390 END))) FROM generate_series(1, 30) g});
wait_published($node, q{aggregatetype = 'sized'}, 'batch_max_bytes: all delivered');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE aggregatetype = 'sized' AND published_at IS NOT NULL}),
	$sized, 'batch_max_bytes: the published ids are the enqueued ids');
my $sized_batches = $node->safe_psql('postgres', q{SELECT batches FROM outbox.status}) - $batches_before;
ok($sized_batches >= 10, "batch_max_bytes: 30 events in $sized_batches batches");
$node->safe_psql('postgres', q{ALTER SYSTEM RESET outbox.batch_max_bytes; SELECT pg_reload_conf();});

# A rejection in one batch of a pipeline is recorded for that event only; a sink that throws
# in a later batch ends the transaction, and the batch started after it is sent again. Every
# event is published in the end, none is marked twice (the relay would stop with "marked n of
# m events"), and the server is not restarted.
for my $case (['rejecting', '{"fail_every": 13}'], ['throwing', '{"throw_every": 5}']) {
	my ($what, $options) = @$case;
	$node->safe_psql('postgres', qq{SELECT outbox.configure_sink('null', '$options')});
	my $sent = ids($node,
		qq{SELECT outbox.enqueue('$what', (g % 10)::text, 'P', '{}') FROM generate_series(1, 300) g});
	ok( $node->poll_query_until('postgres',
			qq{SELECT count(*) = 0 FROM outbox.event_status WHERE aggregatetype = '$what' AND published_at IS NULL AND attempts = 0}),
		"pipelined, $what sink: every event was tried");
	$node->safe_psql('postgres', q{SELECT outbox.configure_sink('null')});
	wait_published($node, qq{aggregatetype = '$what'}, "pipelined, $what sink: all delivered in the end");
	is_deeply(ids($node, qq{SELECT id FROM outbox.event_status WHERE aggregatetype = '$what' AND published_at IS NOT NULL}),
		$sent, "pipelined, $what sink: the published ids are the enqueued ids");
}
ok($node->safe_psql('postgres', q{SELECT count(*) FROM outbox.events WHERE aggregatetype = 'rejecting' AND attempts > 0}) >= 20,
	'pipelined, rejecting sink: the rejections are recorded per event');
is($node->safe_psql('postgres', q{SELECT count(*) FROM outbox.events WHERE aggregatetype = 'throwing' AND attempts > 0}), '0',
	'pipelined, throwing sink: a whole-sink failure burns no attempts');
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started,
	'pipelined: the server was not restarted');
$node->safe_psql('postgres', q{ALTER SYSTEM RESET outbox.batch_size; ALTER SYSTEM SET outbox.max_attempts = 3;
	SELECT pg_reload_conf();});

# Unconfiguring stops the relay without a restart: events wait, and are sent once a sink is
# configured again.
is($node->safe_psql('postgres', q{SELECT outbox.unconfigure_sink()}), 't', 'unconfigure_sink removes the sink');
ok($node->poll_query_until('postgres', q{SELECT state = 'unconfigured' FROM outbox.status}),
	'the relay says it is unconfigured');
my $paused = ids($node, q{SELECT outbox.enqueue('paused', g::text, 'P', '{}') FROM generate_series(1, 5) g});
wait_relay_pass($node, 'the unconfigured relay has looked again since they committed',
	waiting => 'outbox relay: waiting for a sink');
is($node->safe_psql('postgres', q{SELECT count(*) FROM outbox.event_status WHERE aggregatetype = 'paused' AND published_at IS NOT NULL}),
	'0', 'nothing is sent while unconfigured');
$node->safe_psql('postgres', q{SELECT outbox.configure_sink('null')});
wait_published($node, q{aggregatetype = 'paused'}, 'configured again: the waiting events are sent');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE aggregatetype = 'paused' AND published_at IS NOT NULL}),
	$paused, 'configured again: the published ids are the enqueued ids');

# An unconfigured relay sleeps on its latch: it neither polls every few milliseconds nor
# wakes for the commits that enqueue (it tells them it does not want their wake-ups), but
# configure_sink()'s commit wakes it at once. The fallback poll is at an hour: only that
# commit can send the waiting events within the test's deadline.
$node->safe_psql('postgres', q{ALTER SYSTEM SET outbox.poll_interval = '1h'; SELECT pg_reload_conf();});
wait_relay_reloaded($node, { 'outbox.poll_interval' => 3600000 }, 'the relay has read the poll at an hour');
$node->safe_psql('postgres', q{SELECT outbox.unconfigure_sink()});
ok( $node->poll_query_until('postgres', q{
		SELECT query = 'outbox relay: waiting for a sink' FROM pg_stat_activity WHERE backend_type = 'outbox relay'}),
	'unconfigured, the relay waits for a sink');
my $relay_pid = $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'outbox relay'});
# The times the relay went to sleep (each wake-up ends in one).
sub relay_sleeps {
	my ($switches) = slurp_file("/proc/$relay_pid/status") =~ /^voluntary_ctxt_switches:\s+(\d+)/m;
	return $switches;
}
my $sleeps_before = relay_sleeps();
# Two seconds of commits that enqueue, one every 10 ms.
my $asleep = ids($node, q{
	CREATE TEMP TABLE asleep (id uuid);
	DO $$ BEGIN
	  FOR i IN 1 .. 200 LOOP
	    INSERT INTO asleep SELECT outbox.enqueue('asleep', i::text, 'A', '{}');
	    COMMIT;
	    PERFORM pg_sleep(0.01);
	  END LOOP;
	END $$;
	SELECT id FROM asleep});
my $sleeps = relay_sleeps() - $sleeps_before;
ok($sleeps < 20, "an unconfigured relay does not wake for 2 s of commits ($sleeps wake-ups)");
is($node->safe_psql('postgres', q{SELECT count(*) FROM outbox.event_status WHERE aggregatetype = 'asleep' AND published_at IS NOT NULL}),
	'0', 'and sends none of them');
$node->safe_psql('postgres', q{SELECT outbox.configure_sink('null')});
wait_published($node, q{aggregatetype = 'asleep'}, 'configure_sink wakes the relay: the waiting events are sent');
is(scalar(@$asleep), 200, '200 commits enqueued');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE aggregatetype = 'asleep' AND published_at IS NOT NULL}),
	$asleep, 'configured: the published ids are the enqueued ids');
$node->safe_psql('postgres', q{ALTER SYSTEM SET outbox.poll_interval = '200ms'; SELECT pg_reload_conf();});
wait_relay_reloaded($node, { 'outbox.poll_interval' => 200 }, 'the relay has read the poll at 200 ms again');

# Bad configuration is refused with a clear error, and the running sink is kept.
($rc, $out, $err) = $node->psql('postgres', q{SELECT outbox.configure_sink('nope')});
like($err, qr/no sink named "nope"/, 'unknown sink refused');
($rc, $out, $err) = $node->psql('postgres', q{SELECT outbox.configure_sink('null', '{"bogus": 1}')});
like($err, qr/sink "null" has no option "bogus"/, 'bad options refused');
($rc, $out, $err) = $node->psql('postgres', q{SELECT outbox.configure_sink('../../etc/x')});
like($err, qr/invalid sink name/, 'a path is not a sink name');
is($node->safe_psql('postgres', q{SELECT sink FROM outbox.sink_config}), 'null', 'the good configuration stays');

# Observability.
my $status = $node->safe_psql('postgres',
	q{SELECT state, sink, events_sent > 0, unpublished, last_success_at IS NOT NULL FROM outbox.status});
is($status, 'idle|null|t|0|t', 'outbox.status shows the worker and the lag');
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'outbox relay' AND application_name = 'outbox relay'}),
	'1', 'the relay appears in pg_stat_activity');
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'outbox relay' AND state LIKE 'idle in transaction%'}),
	'0', 'the idle relay holds no transaction open');

$node->stop;
done_testing();
