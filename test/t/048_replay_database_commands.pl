# The replay worker leaves a database as its relays do (docs/operations.md, "Several
# databases"). A slow null sink (delay_ms, small batches) keeps a replay of a few thousand
# events running while the DBA works on its database:
#  - DROP DATABASE succeeds at the first try, without FORCE;
#  - ALTER DATABASE ... RENAME succeeds at the first try, and the replay then goes on and
#    finishes: every event of its window reaches the replay's record_file (the ids, as sets);
#  - ALLOW_CONNECTIONS false stops the replay worker, true brings it back, and the replay
#    finishes.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::Bin;
use OutboxNode qw(:DEFAULT :databases);

my $node = databases_node('replay_database_commands', q{
outbox.batch_size = 50
outbox.max_workers = 6
max_worker_processes = 16
});

sub q1 { my ($db, $sql) = @_; return $node->safe_psql($db, $sql); }

# A database with 2000 published events, then a slow sink writing to "$db-replay.tsv" and a
# replay of everything: returns the replay's id once the replay worker has sent some of it.
sub replaying {
	my ($db) = @_;
	add_database($node, $db);
	enqueue_in($node, $db, 2000);
	ok($node->poll_query_until($db, q{
			SELECT count(*) = 0 FROM outbox.event_status WHERE published_at IS NULL}),
		"$db: everything published");
	new_record_file($node, "$db-replay");
	q1($db, qq{SELECT outbox.configure_sink('null',
	             '{"record_file": "$db-replay.tsv", "delay_ms": "300"}')});
	my $id = q1($db, q{SELECT outbox.replay('-infinity', 'infinity')});
	ok( $node->poll_query_until($db, qq{
			SELECT position > 0 AND state = 'running' FROM outbox.replays WHERE id = $id}),
		"$db: the replay runs");
	ok( $node->poll_query_until('postgres', qq{
			SELECT count(*) = 1 FROM pg_stat_activity
			 WHERE backend_type = 'outbox replay' AND datname = '$db'}),
		"$db: its replay worker is there");
	return $id;
}

sub replay_worker_gone {
	my ($db, $what) = @_;
	ok( $node->poll_query_until('postgres', qq{
			SELECT count(*) = 0 FROM pg_stat_activity
			 WHERE backend_type = 'outbox replay' AND datname = '$db'}),
		$what);
}

sub replay_done {
	my ($db, $id, $what) = @_;
	ok($node->poll_query_until($db, qq{SELECT state = 'done' FROM outbox.replays WHERE id = $id}),
		$what);
}

# 1. DROP DATABASE while a replay runs.
replaying('r1');
my ($rc, $stdout, $stderr) = $node->psql('postgres', 'DROP DATABASE r1');
is($rc, 0, 'DROP DATABASE succeeds at the first try while a replay runs') or diag($stderr);
unlike($stderr, qr/being accessed by other users/, '... no session was in its way');
replay_worker_gone('r1', '... and its replay worker is gone');

# 2. ALTER DATABASE ... RENAME while a replay runs: it goes on afterwards.
my $id = replaying('r2');
($rc, $stdout, $stderr) = $node->psql('postgres', 'ALTER DATABASE r2 RENAME TO r2b');
is($rc, 0, 'ALTER DATABASE ... RENAME succeeds at the first try while a replay runs')
  or diag($stderr);
unlike($stderr, qr/being accessed by other users/, '... no session was in its way');
is(q1('r2b', qq{SELECT state FROM outbox.replays WHERE id = $id}), 'running',
	'the replay is still running after the rename');
replay_done('r2b', $id, 'the replay goes on in the renamed database and finishes');
is_deeply(recorded_ids($node, 'r2-replay'), db_ids($node, 'r2b'), 'every event of the window was replayed');
is(q1('r2b', qq{SELECT position = upto_seq AND events_sent >= events_total
                  FROM outbox.replays WHERE id = $id}),
	't', 'its row says so');

# 3. ALLOW_CONNECTIONS false while a replay runs: the replay worker leaves; true brings it
# back and the replay finishes.
new_record_file($node, 'r2-replay2');
q1('r2b', q{SELECT outbox.configure_sink('null',
              '{"record_file": "r2-replay2.tsv", "delay_ms": "300"}')});
$id = q1('r2b', q{SELECT outbox.replay('-infinity', 'infinity')});
ok( $node->poll_query_until('r2b', qq{
		SELECT position > 0 AND state = 'running' FROM outbox.replays WHERE id = $id}),
	'a second replay runs');
q1('postgres', 'ALTER DATABASE r2b ALLOW_CONNECTIONS false');
replay_worker_gone('r2b', 'ALLOW_CONNECTIONS false: the replay worker leaves');
q1('postgres', 'ALTER DATABASE r2b ALLOW_CONNECTIONS true');
# (A replay worker that ignored the stop would have left only once done.)
is(q1('r2b', qq{SELECT state FROM outbox.replays WHERE id = $id}), 'running',
	'... before the replay was done');
replay_done('r2b', $id, 'ALLOW_CONNECTIONS true: the replay goes on and finishes');
is_deeply(recorded_ids($node, 'r2-replay2'), db_ids($node, 'r2b'), 'every event of the window was replayed');

q1('postgres', 'DROP DATABASE r2b');
$node->stop;
done_testing();
