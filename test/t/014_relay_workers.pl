# Two relay workers on one queue (outbox.workers = 2), late commits among a stream. Each sends
# the events of its shards only: it scans past the other's events (which are not its gaps),
# and its mark covers its shards. Event ids are compared as sets. A row sent by both would be
# marked by both, and the second mark finds it changed and fails the batch: so no worker may
# fail, and their counts of events sent and marked add up to the events.
#
# The server is set up with the retired unordered mode (outbox.ordering = none, until 0.6.0):
# the launcher warns, and the workers keep per-key order all the same (they split the shards).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $node = relay_node('workers', "outbox.workers = 2\noutbox.ordering = none\n");
my $q1 = sub { return $node->safe_psql('postgres', $_[0]); };
$q1->('CREATE EXTENSION outbox');
$q1->(q{SELECT outbox.configure_sink('null')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM outbox.status WHERE state = 'idle'}),
	'two relay workers are running');
like(slurp_file($node->logfile), qr/WARNING:  outbox launcher: outbox.ordering = none is retired/,
	'the retired unordered mode is named in the log');
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 2 AND sum(shards) = 64 AND max(shards) < 64 FROM outbox.status}),
	'and the workers split the shards: ordered');
my $log_offset = -s $node->logfile;

# Early transactions that commit late, around a stream from 4 concurrent writers.
my (@late_sessions, @late_ids);
for my $k (1 .. 3) {
	my ($session, $id) = enqueue_in_open_transaction($node, 'late', $k);
	push @late_sessions, $session;
	push @late_ids, $id;
}
$node->pgbench('--no-vacuum --client=4 --jobs=2 --transactions=250', 0, [qr{processed: 1000/1000}], [qr{^$}],
	'4 writers commit 1000 events, a transaction each',
	{ '014_writer' => q{\set k random(1, 100)
SELECT outbox.enqueue('stream', :k::text, 'T', '{"n": 1}');} });
$q1->(q{BEGIN; SELECT outbox.enqueue('rolled_back', g::text, 'T', '{}') FROM generate_series(1, 5) g; ROLLBACK;});
wait_published($node, q{aggregatetype = 'stream'}, 'the stream is delivered while three early transactions are open');
for my $session (@late_sessions) {
	$session->query_safe('COMMIT');
	$session->quit;
}
wait_published($node, q{aggregatetype = 'late'}, 'the late commits are delivered');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE aggregatetype = 'late' AND published_at IS NOT NULL}),
	[ sort @late_ids ], 'exactly the late ids');
is($q1->(q{SELECT count(*) FROM outbox.event_status WHERE published_at IS NULL}), '0', 'nothing is left unpublished');
is($q1->(q{SELECT count(*) FROM outbox.events}), '1003', 'and nothing more was written');
my @sent = split /\|/, $q1->(q{SELECT string_agg(events_sent::text, '|' ORDER BY worker) FROM outbox.status});
note("events sent per worker: @sent");
ok($sent[0] > 0 && $sent[1] > 0, 'both workers sent events');
is($q1->(q{SELECT sum(events_sent) FROM outbox.status}), '1003',
	'the workers sent and marked 1003 events between them');
ok( $node->poll_query_until('postgres',
		q{SELECT low_water > (SELECT max(seq) FROM outbox.events) FROM outbox.relay_state}),
	'the saved mark passes every event');
unlike(slurp_file($node->logfile, $log_offset), qr/outbox relay \d+: .*retrying/, 'no worker failed');

$node->stop;
done_testing();
