# Rotation never waits without limit, and never waits while holding the lock writers need
# (issue 49, item 1). A consumer whose inbox_receive made an inbox partition holds the
# inbox's SHARE UPDATE EXCLUSIVE lock until its transaction ends. rotate() must still return
# while that transaction is open: the events' partitions made and dropped, the inbox's
# rotation skipped (and said so), and an enqueue (and the relay) never queued behind it. So
# must an operator's session that holds the events' SHARE UPDATE EXCLUSIVE lock (a manual
# ANALYZE): the events' rotation is skipped, the inbox's goes on.
#
# Each statement that could hang runs with statement_timeout = the tests' default timeout:
# a rotation that waits fails then, instead of hanging the test.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $node = relay_node('rotate_locks', q{
outbox.partition_interval = '2s'
outbox.retention = '2s'
outbox.inbox_retention = '2s'
outbox.premake = 2
outbox.rotate_lock_timeout = '100ms'
});
my $limit = "SET statement_timeout = '${PostgreSQL::Test::Utils::timeout_default}s';";
sub q1 { return $node->safe_psql('postgres', $_[0]); }

# Runs $sql under the limit: (whether it succeeded, its output, its errors and notices).
sub run_limited {
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my $rc = $node->psql('postgres', "$limit $sql", stdout => \$out, stderr => \$err);
	return ($rc == 0 && $err !~ /ERROR/, $out, $err);
}

# The rows of outbox.rotate() as "action|partition|detail" lines, and whether it returned.
# A last row "ahead|true" when the events' partitions reach outbox.premake intervals past the
# start of its transaction (the newest ends at least 4 s after the rotation's clock).
sub rotate {
	my ($ok, $out, $err) = run_limited(q{
		BEGIN;
		SELECT action, coalesce(partition, ''), coalesce(detail, '') FROM outbox.rotate();
		SELECT 'ahead', (max(upper_bound) >= now() + interval '4s')::text, '' FROM outbox.partitions;
		COMMIT;});
	return ($ok, [ split /\n/, $out ], $err);
}
sub with_action { my ($rows, $action) = @_; return sort map { (split /\|/)[1] } grep { /^\Q$action\E\|/ } @$rows; }

q1('CREATE EXTENSION outbox');
q1(q{SELECT outbox.configure_sink('null')});
q1('CREATE ROLE consumer LOGIN');
q1(q{GRANT USAGE ON SCHEMA outbox TO consumer;
     GRANT EXECUTE ON FUNCTION outbox.inbox_receive(text, uuid, timestamptz) TO consumer});
q1('SELECT count(*) FROM outbox.rotate()');
# The inbox used once: its partitions exist, up to outbox.premake intervals ahead.
q1(q{SELECT outbox.inbox_receive('billing', gen_random_uuid(), now())});

# Partitions of both tables past retention, which a rotation would drop.
my $due = q{upper_bound <= clock_timestamp() - interval '2s'};
ok( $node->poll_query_until('postgres', qq{
		SELECT (SELECT count(*) FROM outbox.partitions WHERE $due) > 0
		   AND (SELECT count(*) FROM outbox.inbox_partitions WHERE $due) > 0}),
	'partitions of the events and of the inbox are past retention');

# --- A consumer's open transaction whose inbox_receive made a partition: an event time
# past the inbox's newest partition (within outbox.premake intervals of the clock).
my $newest = q1('SELECT max(upper_bound) FROM outbox.inbox_partitions');
my $consumer = $node->background_psql('postgres', connstr => $node->connstr('postgres') . ' user=consumer');
is($consumer->query_safe(qq{BEGIN; SELECT outbox.inbox_receive('billing', gen_random_uuid(), '$newest');}),
	't', 'the consumer records an event past the newest inbox partition, in an open transaction');
my $consumer_pid = $consumer->query_safe('SELECT pg_backend_pid()');
is(q1(qq{SELECT count(*) FROM pg_locks WHERE pid = $consumer_pid AND granted
          AND relation = 'outbox.inbox'::regclass AND mode = 'ShareUpdateExclusiveLock'}),
	'1', 'it made a partition, and holds the inbox\'s SHARE UPDATE EXCLUSIVE lock');
ok(q1(qq{SELECT count(*) FROM outbox.inbox_partitions WHERE lower_bound = '$newest'}) eq '0',
	'(a partition no other session sees yet)');

my @due_events = split /\n/, q1(qq{
	SELECT name FROM outbox.partitions
	 WHERE $due AND upper_bound < (SELECT max(upper_bound) FROM outbox.partitions) ORDER BY name});
ok(@due_events > 0, 'events\' partitions are due to be dropped');

# --- rotate() returns while the consumer's transaction is open.
my ($returned, $rows, $messages) = rotate();
ok($returned, 'rotate() returns while the consumer\'s transaction is open') or diag($messages);
my @dropped = with_action($rows, 'dropped');
is_deeply([ grep { my $d = $_; grep { $_ eq $d } @dropped } @due_events ], \@due_events,
	'the events\' partitions past retention are dropped');
is(q1(qq{SELECT count(*) FROM unnest(ARRAY['} . join(q{','}, @due_events) . qq{']) n
          WHERE to_regclass(format('outbox.%I', n)) IS NOT NULL}), '0', '(gone from the catalog)');
ok((grep { /^skipped\|\|.*outbox\.inbox/ } @$rows), 'the inbox\'s rotation is skipped, in a row of its own')
  or diag(join("\n", @$rows));
like($messages, qr/NOTICE:.*outbox\.inbox is busy/, 'with a NOTICE');
is(scalar(grep { /\|inbox_/ } @$rows), 0, 'and nothing is done to the inbox\'s partitions');
ok((grep { $_ eq 'ahead|true|' } @$rows), 'the events\' partitions ahead are made')
  or diag(join("\n", @$rows));

# --- An enqueue, and the relay, while the consumer's transaction is still open.
my ($enqueued, $id) = run_limited(q{SELECT outbox.enqueue('order', 'during', 'OrderCreated', '{}')});
ok($enqueued, 'an enqueue completes while the consumer\'s transaction is open');
wait_published($node, q{aggregateid = 'during'}, 'the relay publishes it meanwhile');
is(q1("SELECT state FROM pg_stat_activity WHERE pid = $consumer_pid"), 'idle in transaction',
	'(the consumer\'s transaction was open all along)');
$consumer->query_safe('COMMIT');
$consumer->quit;
is_deeply(ids($node, q{SELECT id FROM outbox.events WHERE aggregateid = 'during'}), [$id],
	'the enqueued event is the one there');

# Once it has ended, the inbox is rotated: its partitions past retention dropped.
my @due_inbox = split /\n/, q1(qq{SELECT name FROM outbox.inbox_partitions WHERE $due ORDER BY name});
($returned, $rows, $messages) = rotate();
ok($returned, 'rotate() after the consumer\'s commit') or diag($messages);
@dropped = with_action($rows, 'dropped');
is_deeply([ grep { my $d = $_; grep { $_ eq $d } @dropped } @due_inbox ], \@due_inbox,
	'the inbox\'s partitions past retention are dropped');
my @skipped = with_action($rows, 'skipped');
is(scalar(@skipped), 0, 'nothing skipped');

# --- An operator's session holding the events' SHARE UPDATE EXCLUSIVE lock (as ANALYZE
# outbox.events does): the events' rotation is skipped, the inbox's goes on.
ok( $node->poll_query_until('postgres', qq{SELECT count(*) > 0 FROM outbox.inbox_partitions WHERE $due}),
	'an inbox partition is past retention again');
@due_inbox = split /\n/, q1(qq{SELECT name FROM outbox.inbox_partitions WHERE $due ORDER BY name});
my $operator = $node->background_psql('postgres');
$operator->query_safe('BEGIN; LOCK TABLE outbox.events IN SHARE UPDATE EXCLUSIVE MODE;');
($returned, $rows, $messages) = rotate();
ok($returned, 'rotate() returns while the events\' lock is held') or diag($messages);
ok((grep { /^skipped\|\|.*outbox\.events/ } @$rows), 'the events\' rotation is skipped')
  or diag(join("\n", @$rows));
like($messages, qr/NOTICE:.*outbox\.events is busy/, 'with a NOTICE');
is(scalar(grep { /\|events_/ } @$rows), 0, 'and nothing is done to the events\' partitions');
@dropped = with_action($rows, 'dropped');
is_deeply([ grep { my $d = $_; grep { $_ eq $d } @dropped } @due_inbox ], \@due_inbox,
	'the inbox\'s partitions past retention are dropped');
$operator->query_safe('COMMIT');
$operator->quit;

# --- rotate_inbox() alone, while another session holds the inbox's lock.
$operator = $node->background_psql('postgres');
$operator->query_safe('BEGIN; LOCK TABLE outbox.inbox IN SHARE UPDATE EXCLUSIVE MODE;');
my ($ok, $out, $err) = run_limited(q{SELECT action, coalesce(detail, '') FROM outbox.rotate_inbox()});
ok($ok, 'rotate_inbox() returns while another session holds the inbox\'s lock') or diag($err);
like($out, qr/^skipped\|.*outbox\.inbox/, 'and says it skipped');
$operator->query_safe('ROLLBACK');
$operator->quit;

done_testing();
