# Crash at the worst moment for enqueue: the server is killed (immediate stop, as kill -9)
# while a large batch is being written in an open transaction. After recovery the set of
# event ids is exactly the set that was committed: nothing lost, nothing half-written.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION outbox;');

# Committed before the crash, one transaction per event and one batch.
my @committed;
for my $i (1 .. 20) {
	push @committed, $node->safe_psql('postgres',
		qq{SELECT outbox.enqueue('order', '$i', 'OrderCreated', '{"i": $i}')});
}
push @committed, split /\n/, $node->safe_psql('postgres',
	q{SELECT unnest(outbox.enqueue_batch((SELECT jsonb_agg(jsonb_build_object(
	    'aggregatetype', 'order', 'aggregateid', i::text, 'type', 'Batch', 'payload', '{}'::jsonb))
	  FROM generate_series(1, 500) i)))});
is(scalar(@committed), 520, 'ids returned for every committed event');

# In flight at the crash: a big batch in a transaction that is still running.
my ($stdout, $stderr) = ('', '');
# One -c string is one implicit transaction: the batch stays uncommitted while it sleeps,
# for ever (pg_sleep('infinity')): the crash ends it, not a clock.
my $inflight = IPC::Run::start(
	[
		'psql', '-X', '-d', $node->connstr('postgres'), '-c',
		q{SELECT count(*) FROM unnest(outbox.enqueue_batch((SELECT jsonb_agg(jsonb_build_object(
		    'aggregatetype', 'order', 'aggregateid', i::text, 'type', 'InFlight', 'payload', '{}'::jsonb))
		  FROM generate_series(1, 200000) i))); SELECT pg_sleep('infinity');}
	],
	'>', \$stdout, '2>', \$stderr);
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM pg_stat_activity WHERE query LIKE '%InFlight%' AND wait_event = 'PgSleep'}),
	'the in-flight batch is written and its transaction still open');
is($node->safe_psql('postgres', q{SELECT count(*) FROM outbox.events WHERE type = 'InFlight'}),
	'0', 'the open batch is invisible to others');

$node->stop('immediate');
$inflight->finish;
$node->start;

my @after = split /\n/, $node->safe_psql('postgres', 'SELECT id FROM outbox.events ORDER BY id');
my %committed = map { $_ => 1 } @committed;
my %after = map { $_ => 1 } @after;
my @lost = grep { !$after{$_} } @committed;
my @extra = grep { !$committed{$_} } @after;
is(scalar(@lost), 0, 'no committed event lost') or diag("lost: @lost[0 .. 4]");
is(scalar(@extra), 0, 'no event of the uncommitted batch survived') or diag("extra: " . scalar(@extra));

# The outbox keeps working after recovery.
my $id = $node->safe_psql('postgres', q{SELECT outbox.enqueue('order', 'after', 'OrderCreated', '{}')});
like($id, qr/^[0-9a-f-]{36}$/, 'enqueue works after recovery');

$node->stop;
done_testing();
