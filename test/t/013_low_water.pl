# The relay's low-water mark (0.2.0) and the upgrade from 0.1.0 that brings it.
#
# The mark lets the relay scan from a point instead of a partial index on published_at; with
# the delivery log (0.6.0), delivery writes no event row at all. Each guarantee has the test that would catch its
# violation: the mark never passes an event that a running transaction can still commit;
# rejected events waiting for a retry, a reset sequence and requeued dead letters are not
# lost; delivery really leaves the rows alone. Event ids are compared as sets.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $node = relay_node('low_water', qq{
outbox.retry_backoff_min = '10ms'
outbox.retry_backoff_max = '200ms'
});

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub enqueue {
	my ($aggregatetype, $n) = @_;
	return split /\n/, q1(qq{SELECT outbox.enqueue('$aggregatetype', g::text, 'T', '{"n": 1}')
	                          FROM generate_series(1, $n) g});
}

# --- Upgrade: 0.1.0 with a queue in every state, then ALTER EXTENSION UPDATE.
q1(q{CREATE EXTENSION outbox VERSION '0.1.0'});
q1(q{SELECT outbox.configure_sink('null')});
my @pending = enqueue('old_pending', 20);
my @published = enqueue('old_published', 5);
q1(q{UPDATE outbox.events SET published_at = now(), next_attempt_at = now() WHERE aggregatetype = 'old_published'});
my @dead = enqueue('old_dead', 3);
q1(q{UPDATE outbox.events SET dead_at = now(), attempts = 10, next_attempt_at = now() WHERE aggregatetype = 'old_dead'});
my @waiting = enqueue('old_waiting', 2);
q1(q{UPDATE outbox.events SET attempts = 1, next_attempt_at = now() + interval '100 ms' WHERE aggregatetype = 'old_waiting'});
ok($node->poll_query_until('postgres', q{SELECT state = 'waiting for ALTER EXTENSION UPDATE' FROM outbox.status}),
	'the relay waits while the extension is at 0.1.0');
is(q1(q{SELECT count(*) FROM outbox.events WHERE published_at IS NOT NULL}), '5',
	'it sends nothing with the old schema');

q1(q{ALTER EXTENSION outbox UPDATE TO '0.2.0'});
is(q1(q{SELECT extversion FROM pg_extension WHERE extname = 'outbox'}), '0.2.0', 'updated to 0.2.0');
is(q1(q{SELECT string_agg(indexrelid::regclass::text, ',' ORDER BY indexrelid::regclass::text) FROM pg_index
         WHERE indrelid = 'outbox.events'::regclass}),
	'outbox.events_dead,outbox.events_id,outbox.events_queue,outbox.events_retry',
	'no index mentions published_at any more');
is(q1(q{SELECT count(*) FROM outbox.events
         WHERE next_attempt_at IS NOT NULL AND (published_at IS NOT NULL OR dead_at IS NOT NULL)}), '0',
	'delivered and dead events no longer have a next_attempt_at (they leave the retry index)');
is(q1(q{SELECT bool_and(c.reloptions @> array['fillfactor=' || current_setting('outbox.partition_fillfactor')])
         FROM outbox.partitions p
         JOIN pg_class c ON c.oid = format('outbox.%I', p.name)::regclass}),
	't', 'existing partitions get the new fillfactor');
# The relay reads its marks per shard (0.5.0): until the last update it keeps waiting.
is(q1(q{SELECT state FROM outbox.status}), 'waiting for ALTER EXTENSION UPDATE',
	'the relay still waits at 0.2.0');

# --- On to the current version: each partition gets indexes of its own.
q1(q{ALTER EXTENSION outbox UPDATE});
is(q1(q{SELECT extversion = default_version FROM pg_extension, pg_available_extensions
         WHERE extname = 'outbox' AND name = 'outbox'}), 't', 'updated to the current version');
wait_published($node, q{aggregatetype IN ('old_pending', 'old_waiting')},
	'after the updates the relay delivers what was pending and waiting');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE published_at IS NOT NULL}),
	[ sort @pending, @published, @waiting ], 'published: exactly the pending, waiting and old published ids');
is_deeply(ids($node, q{SELECT id FROM outbox.dead_letters}), [ sort @dead ], 'dead letters stay dead letters');
is(q1(q{SELECT dead_lettered FROM outbox.status}), '3', 'status counts them');

is(q1(q{SELECT count(*) FROM pg_index WHERE indrelid = 'outbox.events'::regclass}), '0',
	'no partitioned index any more');
is(q1(q{SELECT bool_and((SELECT count(*) FROM pg_index i WHERE i.indrelid = format('outbox.%I', p.name)::regclass) = 4)
          FROM outbox.partitions p}),
	't', 'every partition has its four indexes');
is_deeply(ids($node, q{SELECT id FROM outbox.dead_letters}), [ sort @dead ], 'dead letters are still dead letters');

# --- Delivery writes no event row: the delivery log has it (xmax 0: never updated, never locked).
my @bulk = enqueue('bulk', 5000);
wait_published($node, q{aggregatetype = 'bulk'}, 'a batch of 5000 is delivered');
is(q1(q{SELECT count(*) FILTER (WHERE xmax <> '0' OR published_at IS NOT NULL) FROM outbox.events
         WHERE aggregatetype = 'bulk'}), '0', 'and no row of it was written by the delivery');
is(q1(q{SELECT count(*) FROM outbox.events e WHERE aggregatetype = 'bulk'
         AND outbox._delivered_at(e.seq) IS NOT NULL}), '5000', 'the delivery log holds it');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE aggregatetype = 'bulk' AND published_at IS NOT NULL}),
	[ sort @bulk ], 'the bulk ids are exactly the enqueued ones');
ok( $node->poll_query_until('postgres',
		q{SELECT low_water > (SELECT max(seq) FROM outbox.events) FROM outbox.relay_state}),
	'when the queue is empty the saved mark is past every event');

# --- The trap: the mark never passes an event that a running transaction can commit.
# The open transaction took its sequence value first; 200 later events commit and are
# delivered meanwhile.
my ($late, $late_id) = enqueue_in_open_transaction($node, 'late', 'late');
my @after = enqueue('after', 200);
wait_published($node, q{aggregatetype = 'after'}, 'later events are delivered while the early transaction is open');
my $late_seq = $late->query_safe(q{SELECT seq FROM outbox.events WHERE aggregatetype = 'late'});
$late_seq =~ s/.*\n//s;
# Had the mark moved past the open transaction's event, the relay would save it in its
# first pass more than the save interval (1 s) after its last save, which came before the
# events above were published (a save since then would show the move): wait for that pass.
my $published = q1(q{SELECT clock_timestamp()});
wait_relay_pass($node, 'the relay ran a pass more than the save interval later',
	after => "'$published'::timestamptz + interval '1 s'");
ok(q1(q{SELECT low_water FROM outbox.relay_state}) <= $late_seq,
	'the saved mark stays at or below the open transaction\'s event');
ok(q1(q{SELECT min(seq) FROM outbox.events WHERE aggregatetype = 'after'}) > $late_seq,
	'although events above it are published');
$late->query_safe('COMMIT');
$late->quit;
wait_published($node, q{aggregatetype = 'late'}, 'the late commit is delivered');
is(q1(q{SELECT id FROM outbox.event_status WHERE aggregatetype = 'late' AND published_at IS NOT NULL}),
	$late_id, 'exactly the late event');

# A transaction that only holds an xid (no event) holds the mark back, not the delivery.
my $holder = $node->background_psql('postgres');
$holder->query_safe(q{BEGIN; SELECT pg_current_xact_id();});
my @held = enqueue('held', 50);
wait_published($node, q{aggregatetype = 'held'}, 'events are delivered while an old transaction holds xmin');
$holder->query_safe('COMMIT');
$holder->quit;

# --- Late commits among others, while an old transaction holds xmin (so the mark cannot
# move): the relay finds them in its gaps, the values its fetches passed over, without
# reading again what it has published. A failure would restart the scan from the mark and
# find them that way too, so the relay must not fail here. With the fallback poll at an
# hour, they can only be found by probing the gaps at the relay's checks.
q1(q{ALTER SYSTEM SET outbox.poll_interval = '1h'; SELECT pg_reload_conf()});
wait_relay_reloaded($node, { 'outbox.poll_interval' => 3600000 }, 'the relay polls once an hour');
my $log_offset = -s $node->logfile;
my $old = $node->background_psql('postgres');
$old->query_safe(q{BEGIN; SELECT pg_current_xact_id();});
my (@late_sessions, @late_ids, @between);
for my $k (1 .. 3) {
	my ($session, $id) = enqueue_in_open_transaction($node, 'late_gap', $k);
	push @late_sessions, $session;
	push @late_ids, $id;
	push @between, enqueue('between', 20);
}
q1(q{BEGIN; SELECT outbox.enqueue('rolled_back_gap', g::text, 'T', '{}') FROM generate_series(1, 5) g; ROLLBACK;});
push @between, enqueue('between', 20);
wait_published($node, q{aggregatetype = 'between'}, 'events around three open transactions are delivered');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE aggregatetype = 'between' AND published_at IS NOT NULL}),
	[ sort @between ], 'exactly those ids');
for my $session (@late_sessions) {
	$session->query_safe('COMMIT');
	$session->quit;
}
wait_published($node, q{aggregatetype = 'late_gap'}, 'late commits are delivered while an old transaction holds xmin');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE aggregatetype = 'late_gap' AND published_at IS NOT NULL}),
	[ sort @late_ids ], 'exactly the late ids');
q1(q{ALTER SYSTEM RESET outbox.poll_interval; SELECT pg_reload_conf()});
$old->query_safe('COMMIT');
$old->quit;
ok( $node->poll_query_until('postgres',
		q{SELECT low_water > (SELECT max(seq) FROM outbox.events) FROM outbox.relay_state}),
	'once xmin moves on, the mark passes the late events and the rolled-back gap');
unlike(slurp_file($node->logfile, $log_offset), qr/outbox relay \d+: .*retrying/,
	'the relay did not fail meanwhile');

# --- A rolled-back transaction leaves a gap in the sequence; the mark moves past it.
q1(q{BEGIN; SELECT outbox.enqueue('rolled_back', '1', 'T', '{}'); ROLLBACK;});
my @gap = enqueue('gap', 10);
wait_published($node, q{aggregatetype = 'gap'}, 'events after a rolled-back one are delivered');
ok( $node->poll_query_until('postgres',
		q{SELECT low_water > (SELECT max(seq) FROM outbox.events) FROM outbox.relay_state}),
	'the mark moves past the gap');

# --- A rejected event waiting for its retry does not hold the mark; it is still sent.
q1(q{ALTER SYSTEM SET outbox.retry_backoff_min = '3s'; ALTER SYSTEM SET outbox.retry_backoff_max = '3s'; SELECT pg_reload_conf()});
wait_relay_reloaded($node, { 'outbox.retry_backoff_min' => 3000, 'outbox.retry_backoff_max' => 3000 },
	'the relay backs off 3 s');
q1(q{SELECT outbox.configure_sink('null', '{"fail_every": 1}')});
my ($rejected) = enqueue('rejected', 1);
ok($node->poll_query_until('postgres',
		qq{SELECT attempts = 1 AND next_attempt_at IS NOT NULL FROM outbox.events WHERE id = '$rejected'}),
	'a rejected event waits for its retry');
q1(q{SELECT outbox.configure_sink('null')});
my @passing = enqueue('passing', 20);
wait_published($node, q{aggregatetype = 'passing'}, 'newer events pass the waiting one');
ok( $node->poll_query_until('postgres', qq{
		SELECT low_water > (SELECT max(seq) FROM outbox.events WHERE aggregatetype = 'passing')
		  FROM outbox.relay_state}),
	'the mark moves past the waiting event');
wait_published($node, qq{id = '$rejected'}, 'the waiting event is sent at its retry time');
is(q1(qq{SELECT attempts || ',' || (next_attempt_at IS NULL) FROM outbox.events WHERE id = '$rejected'}),
	'1,true', 'once published it leaves the retry index');
q1(q{ALTER SYSTEM RESET outbox.retry_backoff_min; ALTER SYSTEM RESET outbox.retry_backoff_max; SELECT pg_reload_conf()});

# --- A dead letter below the mark, requeued, is sent again (it takes a new seq).
q1(q{ALTER SYSTEM SET outbox.max_attempts = 1; SELECT pg_reload_conf()});
wait_relay_reloaded($node, { 'outbox.max_attempts' => 1 }, 'the relay dead-letters at the first rejection');
q1(q{SELECT outbox.configure_sink('null', '{"fail_every": 1}')});
my ($poison) = enqueue('poison', 1);
ok($node->poll_query_until('postgres', qq{SELECT count(*) = 1 FROM outbox.dead_letters WHERE id = '$poison'}),
	'an event is dead-lettered');
q1(q{SELECT outbox.configure_sink('null')});
enqueue('above_poison', 10);
ok( $node->poll_query_until('postgres', qq{
		SELECT low_water > (SELECT seq FROM outbox.events WHERE id = '$poison') FROM outbox.relay_state}),
	'the mark passes the dead letter');
is(q1(qq{SELECT outbox.requeue('$poison')}), 't', 'requeue it');
wait_published($node, qq{id = '$poison'}, 'the requeued dead letter is delivered');
q1(q{ALTER SYSTEM RESET outbox.max_attempts; SELECT pg_reload_conf()});

# --- Someone resets the sequence: new events sit below the mark. The relay notices.
# Until it does, the new events' seqs are in the delivery log, so event_status calls them
# published (docs/design.md, "A reset sequence"): wait for the relay first.
my $reset_offset = -s $node->logfile;
q1(q{SELECT setval('outbox.events_seq', 1, false)});
my @reset = enqueue('after_reset', 10);
ok($node->wait_for_log(qr/outbox\.events_seq was reset/, $reset_offset), 'the relay logs the reset');
wait_published($node, q{aggregatetype = 'after_reset'}, 'events after a sequence reset are delivered');

# --- A reset while no relay runs, followed by more events than the old mark: the relay
# cannot see the sequence go back, but it sees the sequence's new file.
ok($node->poll_query_until('postgres', q{
		SELECT low_water > (SELECT max(seq) FROM outbox.events WHERE aggregatetype = 'after_reset')
		  FROM outbox.relay_state}),
	'the mark is saved past the events after the first reset');
my $old_mark = q1(q{SELECT low_water FROM outbox.relay_state});
$node->append_conf('postgresql.conf', "outbox.workers = 0\n");
$node->restart;
q1(q{TRUNCATE outbox.events RESTART IDENTITY});
my $n_restart = $old_mark + 10;
my @restarted = enqueue('after_restart', $n_restart);
ok(q1(q{SELECT min(seq) FROM outbox.events}) < $old_mark, 'new events now sit below the old mark');
$node->append_conf('postgresql.conf', "outbox.workers = 1\n");
$reset_offset = -s $node->logfile;
$node->restart;
ok($node->wait_for_log(qr/outbox\.events_seq was reset/, $reset_offset),
	'the new relay sees the sequence\'s new file');
wait_published($node, q{aggregatetype = 'after_restart'}, 'after TRUNCATE ... RESTART IDENTITY with the relay stopped, all are delivered');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE aggregatetype = 'after_restart' AND published_at IS NOT NULL}),
	[ sort @restarted ], 'exactly those ids');

# --- Everything, once more, as sets: every committed event is published or a dead letter.
is(q1(q{SELECT count(*) FROM outbox.event_status WHERE published_at IS NULL AND dead_at IS NULL}), '0',
	'nothing is left unpublished');
is(q1(q{SELECT unpublished FROM outbox.status}), '0', 'and status agrees');

$node->stop;
done_testing();
