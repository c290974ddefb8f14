# The relay publishes an event only once its transaction cannot vanish any more.
#  - Writers with synchronous_commit = off return before their commit is flushed; a crash
#    (here an immediate shutdown) loses what was not. Five crashes in the middle of such a
#    stream: every event the broker received is in the table after recovery. The WAL writer
#    is slowed down (wal_writer_delay = 10 s) so that unflushed commits stay unflushed long
#    enough to be sent: without the relay's flush, each crash lost what it had sent.
#  - COMMIT PREPARED wakes the relay as a commit does (the poll is an hour here).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

use FindBin;
use lib $FindBin::Bin;
use KafkaMock;
use OutboxNode;

plan skip_all => 'no ' . KafkaMock::binary() unless -x KafkaMock::binary();

my $mock = KafkaMock->start(1);
my $bootstrap = $mock->bootstrap;
my $node = relay_node('durability', q{
wal_writer_delay = '10s'
max_prepared_transactions = 2
restart_after_crash = on
});
$node->safe_psql('postgres', 'CREATE EXTENSION outbox');
$node->safe_psql('postgres', qq{SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "$bootstrap"}')});

sub in_topic {
	my %ids;
	for my $line ($mock->consume('outbox.event.order', '%h\n')) {
		$ids{$1} = 1 if $line =~ /(?:^|,)id=([0-9a-f-]{36})/;
	}
	return \%ids;
}

# A writer that commits one event every 20 ms with synchronous_commit = off, until the
# server goes away under it.
sub start_writer {
	my ($round) = @_;
	my $sql = qq{DO \$\$ BEGIN
  FOR i IN 1..100000 LOOP
    PERFORM outbox.enqueue('order', (i % 5)::text, 'round-$round', jsonb_build_object('i', i));
    COMMIT;
    PERFORM pg_sleep(0.02);
  END LOOP;
END \$\$;};
	my ($out, $err) = ('', '');
	# Separate -c commands: a DO block may commit only outside a transaction block.
	return IPC::Run::start(
		[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'),
		  '-c', 'SET synchronous_commit = off', '-c', $sql ],
		'>', \$out, '2>', \$err);
}

for my $round (1 .. 5) {
	my $writer = start_writer($round);
	# Let the relay publish a good part of the stream, then crash in the middle of it.
	$node->poll_query_until('postgres',
		qq{SELECT count(*) >= 20 FROM outbox.event_status WHERE type = 'round-$round' AND published_at IS NOT NULL});
	$node->stop('immediate');
	$writer->finish;    # psql lost its server
	$node->start;
}
# Every event the broker has, across all rounds, against the table after the last recovery.
my %in_table = map { $_ => 1 } @{ ids($node, q{SELECT id FROM outbox.events}) };
my $topic = in_topic();
my @ghosts = grep { !$in_table{$_} } keys %$topic;
is(scalar(@ghosts), 0, 'no event reached the broker whose transaction was lost in a crash')
  or diag('ghosts: ' . join(' ', @ghosts[0 .. ($#ghosts < 4 ? $#ghosts : 4)]));
ok(scalar(keys %$topic) >= 100, 'the stream was delivered around the crashes')
  or diag(scalar(keys %$topic) . ' events in the topic, ' . scalar(keys %in_table) . ' in the table');
wait_published($node, 'true', 'everything that survived is delivered');

# COMMIT PREPARED wakes the relay: with the poll at an hour, only the wake-up delivers (well
# within the test's deadline). The relay reads the hour when it starts.
$node->append_conf('postgresql.conf', "outbox.poll_interval = '1h'");
$node->restart;
wait_relay_idle($node, 'restarted with the poll at an hour, the relay waits');
my $id = $node->safe_psql('postgres', q{SELECT outbox.enqueue('order', 'p', 'before-2pc', '{}')});
wait_published($node, qq{id = '$id'}, 'a plain commit is delivered');
$id = $node->safe_psql('postgres', q{
BEGIN;
SELECT outbox.enqueue('order', 'p', 'prepared', '{}');
PREPARE TRANSACTION 'outbox_2pc';
});
$node->safe_psql('postgres', q{COMMIT PREPARED 'outbox_2pc'});
wait_published($node, q{type = 'prepared'}, 'COMMIT PREPARED wakes the relay');

$node->stop;
$mock->stop;
done_testing();
