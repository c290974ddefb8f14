# The delivery log across crashes (docs/design.md, "The delivery log"): kill -9 of the relay
# at each step of a batch, and outbox.event_status checked against an independent consumer,
# the null sink's record_file (a line per acknowledged message). Where the relay is held:
#  - at the fetch: a session holds outbox.events in EXCLUSIVE mode (the relay's first lock);
#  - during the send: the null sink takes delay_ms per batch;
#  - at the log insert: a session holds outbox.deliveries in EXCLUSIVE mode;
#  - logged, not committed: a backlog pipelines batches; the relay has written a batch's log
#    row and sends the next one;
#  - committed: the batch's transaction committed and was checkpointed, while an open
#    transaction holds the low-water mark below it, so the relay starts again below it.
# Before the commit, the batch is sent again (it is recorded twice when the sink had
# acknowledged it); after, it is not. Every committed event is recorded, and event_status
# says published for exactly the recorded ids.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my ($node, $record_file) = record_node('delivery_log', q{
outbox.batch_size = 10
outbox.retry_backoff_min = '50ms'
outbox.retry_backoff_max = '200ms'
restart_after_crash = on
});

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub sink {
	my ($extra) = @_;
	$extra = $extra ? ", $extra" : '';
	q1(qq{SELECT outbox.configure_sink('null', '{"record_file": "deliveries.tsv"$extra}')});
}

my %enqueued;    # id => tag
sub enqueue {
	my ($tag, $n) = @_;
	my @ids = split /\n/, q1(qq{SELECT unnest(outbox.enqueue_batch((SELECT jsonb_agg(jsonb_build_object(
		'aggregatetype', 'log', 'aggregateid', (i % 3)::text, 'type', '$tag', 'payload', jsonb_build_object('i', i)))
		FROM generate_series(1, $n) i)))});
	$enqueued{$_} = $tag for @ids;
	return @ids;
}

# id => how many times the consumer got it.
sub recorded {
	my %count;
	for my $line (split /\n/, slurp_file($record_file)) {
		my (undef, undef, $id) = split /\t/, $line;
		$count{$id}++ if defined $id && $id =~ /^[0-9a-f-]{36}$/;
	}
	return \%count;
}

sub relay_pid {
	return q1(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'outbox relay'});
}

# Kills the relay (the postmaster then restarts every process) and waits for a new one.
sub kill_relay {
	my ($what) = @_;
	my $pid = relay_pid();
	ok($pid, "$what: the relay runs");
	kill 'KILL', $pid;
	ok( $node->poll_query_until('postgres', qq{
			SELECT count(*) = 1 FROM outbox.status WHERE pid IS NOT NULL AND pid <> $pid}),
		"$what: killed, and a new relay runs");
}

# Waits until the relay matches $where in pg_stat_activity (alias a).
sub wait_relay_at {
	my ($what, $where) = @_;
	ok( $node->poll_query_until('postgres', qq{
			SELECT count(*) = 1 FROM pg_stat_activity a WHERE a.backend_type = 'outbox relay' AND $where}),
		"$what: the relay is there");
}

my $holds_log_lock = q{EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid
	AND l.relation = 'outbox.deliveries'::regclass AND l.mode = 'RowExclusiveLock' AND l.granted)};

q1('CREATE EXTENSION outbox');
sink();
enqueue('warm', 20);
wait_published($node, q{type = 'warm'}, 'warm-up: delivered');
is(q1(q{SELECT count(*) FROM outbox.deliveries}) > 0 ? 'logged' : 'none', 'logged', 'delivery writes the log');
is(q1(q{SELECT count(*) FROM outbox.events WHERE published_at IS NOT NULL}), '0',
	'and no event row');

# 1. At the fetch: events wait while the relay sends a slow batch; a session then takes
# outbox.events (granted when that batch commits), and the relay's next transaction waits
# at its first lock, with the events committed and not fetched.
sink('"delay_ms": 1000');
enqueue('busy', 5);
wait_relay_at('busy', q{a.query LIKE 'outbox relay: sending%'});
my @fetch = enqueue('fetch', 5);
my $locker = $node->background_psql('postgres', on_error_stop => 0);
$locker->query_safe('BEGIN; LOCK TABLE outbox.events IN EXCLUSIVE MODE');
wait_relay_at('at the fetch', q{a.wait_event_type = 'Lock'});
kill_relay('at the fetch');
eval { $locker->quit };
wait_published($node, q{type IN ('busy', 'fetch')}, 'at the fetch: delivered after the restart');

# 2. During the send: the sink holds the batch, unacknowledged.
my @send = enqueue('send', 5);
wait_relay_at('during the send', qq{a.query LIKE 'outbox relay: sending%' AND NOT $holds_log_lock});
kill_relay('during the send');
wait_published($node, q{type = 'send'}, 'during the send: delivered after the restart');

# 3. At the log insert: the sink acknowledged; the INSERT waits for the lock.
sink();
$locker = $node->background_psql('postgres', on_error_stop => 0);
$locker->query_safe('BEGIN; LOCK TABLE outbox.deliveries IN EXCLUSIVE MODE');
my @insert = enqueue('insert', 5);
wait_relay_at('at the log insert', q{a.wait_event_type = 'Lock'});
kill_relay('at the log insert');
eval { $locker->quit };
wait_published($node, q{type = 'insert'}, 'at the log insert: delivered after the restart');
my $rec = recorded();
is(scalar(grep { ($rec->{$_} // 0) >= 2 } @insert), 5, 'at the log insert: acknowledged, not logged, so sent again');

# 4. Logged, not committed: a backlog of 8 batches, 300 ms each in the sink. The relay has
# written a batch's log row (it holds the log's lock) and sends the next one.
sink('"delay_ms": 300');
my @pipeline = enqueue('pipeline', 80);
wait_relay_at('logged, not committed', qq{a.query LIKE 'outbox relay: sending%' AND $holds_log_lock});
my $before = recorded();
kill_relay('logged, not committed');
sink();
wait_published($node, q{type = 'pipeline'}, 'logged, not committed: delivered after the restart');
$rec = recorded();
my @again = grep { ($before->{$_} // 0) >= 1 && $rec->{$_} >= 2 } @pipeline;
ok(@again >= 10, 'logged, not committed: a whole acknowledged batch was sent again (' . scalar(@again) . ' events)');

# 5. Committed: a transaction that enqueued first and stays open holds the mark below the
# batch; after the kill the relay scans from the mark again and must pass the batch over.
my ($open, $open_id) = enqueue_in_open_transaction($node, 'log', 'open', 'open');
my @committed = enqueue('committed', 5);
wait_published($node, q{type = 'committed'}, 'committed: delivered');
q1('CHECKPOINT');
ok(q1(qq{SELECT low_water <= (SELECT min(seq) FROM outbox.events WHERE type = 'committed') FROM outbox.relay_state}) eq 't',
	'committed: the saved mark is below the batch');
kill_relay('committed');
eval { $open->quit };
my @after = enqueue('after', 5);
wait_published($node, q{type = 'after'}, 'committed: the new relay delivers what follows');
ok($node->poll_query_until('postgres', q{
		SELECT low_water > (SELECT max(seq) FROM outbox.events WHERE type = 'after') FROM outbox.relay_state}),
	'committed: and its mark passes the batch');
$rec = recorded();
is_deeply([ map { $rec->{$_} } @committed ], [ (1) x 5 ], 'committed: not sent again');

# 6. No crash, many gaps: while an old transaction holds xmin (the mark cannot move), 100
# enqueues that roll back alternate with 100 that commit, each seen by its own scan. Each
# rolled-back value is a gap, more than a probe reads one by one (64); the probe reads
# merged intervals, which also span the events just sent, and must not send those again.
my $holder = $node->background_psql('postgres');
$holder->query_safe(q{BEGIN; SELECT pg_current_xact_id()});
my $writer = $node->background_psql('postgres');
my @gapped;
for my $k (1 .. 100) {
	$writer->query_safe(q{BEGIN; SELECT outbox.enqueue('log', 'gap', 'aborted', '{}'); ROLLBACK});
	my $id = $writer->query_safe(qq{SELECT outbox.enqueue('log', 'gap$k', 'gapped', '{}')});
	chomp $id;
	push @gapped, $id;
	$enqueued{$id} = 'gapped';
	wait_published($node, qq{id = '$id'}, "gapped $k: delivered") if $k % 25 == 0;
	usleep(20_000);
}
wait_published($node, q{type = 'gapped'}, 'many gaps: delivered while xmin is held');
sleep 1;    # five poll intervals: the wide probes run again
$rec = recorded();
is_deeply([ map { $rec->{$_} } @gapped ], [ (1) x 100 ], 'many gaps: each event sent once');
$holder->query_safe('COMMIT');
$holder->quit;
$writer->quit;

# Every committed event reached the consumer, and event_status agrees with it, as sets.
is_deeply([ sort grep { $rec->{$_} } keys %enqueued ], [ sort keys %enqueued ], 'every committed event was recorded');
is_deeply([ sort keys %$rec ], [ sort keys %enqueued ], 'and nothing else');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE state = 'published' AND published_at IS NOT NULL}),
	[ sort keys %$rec ], 'event_status: published is exactly what the consumer got');
is(q1(q{SELECT unpublished FROM outbox.status}), '0', 'outbox.status agrees');

$node->stop;
done_testing();
