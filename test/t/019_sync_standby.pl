# With outbox.wait_for_sync_standbys, the relay publishes only what the synchronous standby
# has flushed, so that a failover to it never leaves consumers holding events the new
# primary lacks. Writers here commit with synchronous_commit = local: their commits do not
# wait for the standby, only the relay does.
#  - Standby down: events wait, outbox.status says why; standby back: they are delivered.
#  - Standby down again, events enqueued, primary lost, standby promoted: none of those
#    events reached the broker, and the broker holds nothing the new primary lacks.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::Bin;
use KafkaMock;
use OutboxNode;

plan skip_all => 'no ' . KafkaMock::binary() unless -x KafkaMock::binary();

my $mock = KafkaMock->start(1);
my $bootstrap = $mock->bootstrap;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', q{
shared_preload_libraries = 'outbox'
outbox.database = 'postgres'
outbox.poll_interval = '200ms'
outbox.wait_for_sync_standbys = on
});
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION outbox');
$primary->safe_psql('postgres', qq{SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "$bootstrap"}')});
$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby1');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup('standby1');
# Synchronous from now on (set earlier, the setup's own commits would wait for a standby).
$primary->append_conf('postgresql.conf', "synchronous_standby_names = 'standby1'");
$primary->reload;
ok( $primary->poll_query_until('postgres',
		q{SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'standby1'}),
	'the standby is synchronous');

sub in_topic {
	my %ids;
	for my $line ($mock->consume('outbox.event.order', '%h\n')) {
		$ids{$1} = 1 if $line =~ /(?:^|,)id=([0-9a-f-]{36})/;
	}
	return \%ids;
}
sub enqueue_local {
	my ($n, $tag) = @_;
	return split /\n/, $primary->safe_psql('postgres', qq{
SET synchronous_commit = local;
SELECT unnest(outbox.enqueue_batch((SELECT jsonb_agg(jsonb_build_object(
  'aggregatetype', 'order', 'aggregateid', (i % 3)::text, 'type', '$tag', 'payload', '{}'::jsonb))
  FROM generate_series(1, $n) i)))});
}

my @first = enqueue_local(10, 'first');
wait_published($primary, q{type = 'first'}, 'with the standby streaming, events are delivered');

# Standby down: the relay waits, and says so.
$standby->stop;
my @second = enqueue_local(10, 'second');
ok( $primary->poll_query_until('postgres',
		q{SELECT state = 'waiting for synchronous standbys' FROM outbox.status}),
	'with the standby down, the relay waits for it');
my $topic = in_topic();
is(scalar(grep { $topic->{$_} } @second), 0, '... and sends nothing it has not flushed');
$standby->start;
wait_published($primary, q{type = 'second'}, 'once the standby is back, they are delivered');

# Standby down again; events enqueued; the primary is lost; the standby is promoted.
$standby->stop;
my @third = enqueue_local(10, 'third');
ok( $primary->poll_query_until('postgres',
		q{SELECT state = 'waiting for synchronous standbys' FROM outbox.status}),
	'the relay waits again');
$primary->stop('immediate');
$standby->start;
$standby->promote;
# The new primary has no synchronous standby of its own.
$standby->append_conf('postgresql.conf', "synchronous_standby_names = ''");
$standby->reload;
my %on_new_primary = map { $_ => 1 } @{ ids($standby, q{SELECT id FROM outbox.events}) };
is(scalar(grep { $on_new_primary{$_} } @third), 0, 'the new primary lacks the last events');
$topic = in_topic();
my @ghosts = grep { !$on_new_primary{$_} } keys %$topic;
is(scalar(@ghosts), 0, 'the broker holds no event the new primary lacks');
is(scalar(grep { $topic->{$_} } @first, @second), 20, 'and every event the standby had was delivered');

# The new primary's relay goes on.
my $id = $standby->safe_psql('postgres', q{SELECT outbox.enqueue('order', 'x', 'after-failover', '{}')});
wait_published($standby, qq{id = '$id'}, 'the promoted standby delivers new events');

$standby->stop;
$mock->stop;
done_testing();
