# An idle relay runs no transaction (src/relay/idle.cpp): with nothing committed through
# outbox's functions and nothing due, its poll reads the database's commit count and skips
# the pass. This checks that
#  - an idle relay does not run its pass at every outbox.poll_interval (its transactions in
#    pg_stat_database stay far below what the poll would make);
#  - rows written without outbox's functions (a plain INSERT into outbox.events) are still
#    delivered, by the slower outbox.idle_check_interval;
#  - an enqueue during the idle time is delivered without waiting for that poll, also with
#    outbox.wake_at_commit off (the count alone), and a rejected event's retries go out when
#    due with no commit to wake the relay.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

# Autovacuum off: the database's transactions are the relay's and this test's.
my $node = relay_node('idle_skip', qq{
outbox.poll_interval = '100ms'
outbox.idle_check_interval = '1h'
outbox.retry_backoff_min = '300ms'
autovacuum = off
});
sub q1 { return $node->safe_psql('postgres', $_[0]); }
q1('CREATE EXTENSION outbox');
q1(q{SELECT outbox.configure_sink('null')});

my @sent;
sub enqueue {
	my ($type, $n, $prefix) = @_;
	my $ids = ids($node, ($prefix // '') .
		qq{SELECT outbox.enqueue('$type', g::text, 'T', '{}') FROM generate_series(1, $n) g});
	push @sent, @$ids;
	return $ids;
}
sub published {
	my ($type) = @_;
	return ids($node, qq{SELECT id FROM outbox.event_status WHERE aggregatetype = '$type' AND published_at IS NOT NULL});
}

# 1. Idle: over 5 s the poll (100 ms) would run 50 passes, a transaction each.
my $first = enqueue('first', 3);
wait_published($node, q{aggregatetype = 'first'}, 'the first events are delivered');
wait_relay_idle($node, 'the relay waits for events');
sleep 2;    # the mark settles and is saved (once a second)
my $commits = q{SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'};
my $before = q1($commits);
sleep 5;
my $during = q1($commits) - $before;
# This test's own two sessions count a few; a relay that ran its pass would count ~50.
ok($during <= 10, "an idle relay runs (almost) no transaction: $during in 5 s at a 100 ms poll");

# 2. A plain INSERT moves no count: the idle check finds it.
q1(q{ALTER SYSTEM SET outbox.idle_check_interval = '1s'; SELECT pg_reload_conf()});
wait_relay_reloaded($node, { 'outbox.idle_check_interval' => '1000' }, 'a short idle check is read');
my $raw = ids($node, q{
	INSERT INTO outbox.events (created_at, part_at, id, aggregatetype, aggregateid, type, payload)
	SELECT now(), now(), gen_random_uuid(), 'raw', g::text, 'T', '{}' FROM generate_series(1, 5) g
	RETURNING id});
push @sent, @$raw;
wait_published($node, q{aggregatetype = 'raw'}, 'rows inserted by hand are delivered');
is_deeply(published('raw'), $raw, 'exactly the rows inserted by hand');

# 3. Back to a long idle check: what follows cannot have been found by it.
q1(q{ALTER SYSTEM SET outbox.idle_check_interval = '1h'; SELECT pg_reload_conf()});
wait_relay_reloaded($node, { 'outbox.idle_check_interval' => '3600000' }, 'a long idle check is read');
my $woken = enqueue('woken', 4);
wait_published($node, q{aggregatetype = 'woken'}, 'an enqueue while idle is delivered');
is_deeply(published('woken'), $woken, 'exactly the enqueued events');

# Without the wake-up at commit, the count read at the next poll.
wait_relay_idle($node, 'idle again');
my $counted = enqueue('counted', 4, 'SET outbox.wake_at_commit = off; ');
wait_published($node, q{aggregatetype = 'counted'}, 'an enqueue with wake_at_commit off is delivered');
is_deeply(published('counted'), $counted, 'exactly those events');

# A rejected event's retries: due later, with no commit between them.
q1(q{SELECT outbox.configure_sink('null', '{"reject_aggregateid": "retry", "reject_times": 2}')});
wait_relay_idle($node, 'idle with the rejecting sink');
my $retried = ids($node, q{SELECT outbox.enqueue('retry', 'retry', 'T', '{}')});
push @sent, @$retried;
wait_published($node, q{aggregatetype = 'retry'}, 'a rejected event is retried until delivered');
is(q1(q{SELECT attempts FROM outbox.events WHERE aggregatetype = 'retry'}), '2',
	'after its two rejections');

is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE published_at IS NOT NULL}),
	[ sort @sent ], 'every event written is published, and nothing else');
$node->stop;
done_testing();
