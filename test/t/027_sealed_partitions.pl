# Sealed partitions (src/relay/seal.cpp): once a past partition holds no waiting event and no
# transaction can still route one there, the relay's queries leave it out. This checks that
#  - partitions are sealed, and a sealed partition's indexes are read no more, while events
#    keep flowing;
#  - an event whose enqueue began in a partition's range and inserts after the range has
#    passed (here: held by a trigger) is not lost: no partition at or above it is sealed
#    while its transaction runs (without the wait for running transactions, its partition is
#    sealed empty and the event is never sent);
#  - a dead letter requeued in a sealed partition is sent (requeue resets the seal).
# One-second partitions; the relay logs each seal at DEBUG1.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $node = relay_node('sealed', qq{
outbox.partition_interval = '1s'
outbox.premake = 20
outbox.retention = 0
outbox.max_attempts = 1
log_min_messages = debug1
});
sub q1 { return $node->safe_psql('postgres', $_[0]); }
q1('CREATE EXTENSION outbox');
q1(q{SELECT outbox.configure_sink('null')});

# The newest "partitions below X are sealed" in the log since $offset, or undef.
sub sealed_below {
	my ($offset) = @_;
	my @all = slurp_file($node->logfile, $offset) =~ /outbox relay: partitions below (.+?) are sealed/g;
	return $all[-1];
}
# Waits until the relay has sealed the partition of event $id; rotate() keeps partitions ahead.
sub wait_sealed {
	my ($id, $offset, $what) = @_;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline) {
		q1('SELECT count(*) FROM outbox.rotate()');
		my $below = sealed_below($offset);
		return pass($what)
		  if defined $below
		  && q1(qq{SELECT '$below'::timestamptz > part_at FROM outbox.events WHERE id = '$id'}) eq 't';
		usleep(200_000);
	}
	fail($what);
}
sub enqueue { return q1(qq{SELECT outbox.enqueue('$_[0]', '$_[1]', 'T', '{}')}); }

# 1. Sealing, and what it saves.
my $offset = -s $node->logfile;
my $first = enqueue('flow', 0);
wait_published($node, qq{id = '$first'}, 'an event is published');
wait_sealed($first, $offset, "its partition is sealed once past");
my $sealed = q1(qq{SELECT tableoid::regclass FROM outbox.events WHERE id = '$first'});
# Statistics reach the view when the relay reports them: after a commit, at most once a
# second. The relay reads outbox.relay_shards once a second (saving its mark), and nothing
# else here does: once that count has moved twice, what the relay did before is reported.
sub wait_relay_stats {
	my $reads = q{SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables
	               WHERE relid = 'outbox.relay_shards'::regclass};
	for my $report (1, 2) {
		my $last = q1($reads);
		$node->poll_query_until('postgres', "SELECT ($reads) > $last")
		  or die "the relay's statistics did not move";
	}
}
my $scans = sub {
	return q1(qq{SELECT sum(idx_scan) FROM pg_stat_user_indexes WHERE relid = '$sealed'::regclass});
};
wait_relay_stats();
my $before = $scans->();
my @flow = map { enqueue('flow', $_) } 1 .. 20;
wait_published($node, q{aggregatetype = 'flow'}, 'events keep flowing');
wait_relay_stats();
is($scans->(), $before, "the sealed partition's indexes are not read any more");

# 2. An enqueue that inserts into a partition after its range has passed.
q1(q{CREATE FUNCTION gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.aggregatetype = 'gated' THEN
    PERFORM pg_advisory_lock_shared(4242);
    PERFORM pg_advisory_unlock_shared(4242);
  END IF;
  RETURN NEW;
END $$});
q1('CREATE TRIGGER gate BEFORE INSERT ON outbox.events FOR EACH ROW EXECUTE FUNCTION gate()');
my $holder = $node->background_psql('postgres');
$holder->query_safe('SELECT pg_advisory_lock(4242)');
my $writer = $node->background_psql('postgres');
my $started = q1('SELECT clock_timestamp()');
$writer->query_until(qr/started/, q{\echo started
SELECT outbox.enqueue('gated', '1', 'T', '{}');
});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%gated%'}),
	'the enqueue waits in the trigger, its partition chosen');
# The relay's chance to seal the gated event's partition: a few rounds (one a second) with
# its range past and newer partitions made.
$offset = -s $node->logfile;
for (1 .. 4) { q1('SELECT count(*) FROM outbox.rotate()'); enqueue('flow', 'more'); sleep 1; }
my $below = sealed_below($offset);
ok(!defined $below || q1(qq{SELECT '$below'::timestamptz <= '$started'::timestamptz}) eq 't',
	'nothing at or above the waiting enqueue is sealed while it runs');
$holder->query_safe('SELECT pg_advisory_unlock(4242)');
$holder->quit;
$writer->quit;
ok(q1(qq{SELECT part_at < '$started'::timestamptz + interval '1 second' FROM outbox.events WHERE aggregatetype = 'gated'}) eq 't',
	'the gated event went into the partition of its start');
wait_published($node, q{aggregatetype = 'gated'}, 'the gated event is published');
wait_sealed(q1(q{SELECT id FROM outbox.events WHERE aggregatetype = 'gated'}), $offset,
	'and its partition is sealed afterwards');
q1('DROP TRIGGER gate ON outbox.events');

# 3. A dead letter requeued in a sealed partition.
q1(q{SELECT outbox.configure_sink('null', '{"fail_every": "1"}')});
my $dead = enqueue('dead', 1);
ok($node->poll_query_until('postgres', qq{SELECT dead_at IS NOT NULL FROM outbox.events WHERE id = '$dead'}),
	'an event is dead-lettered');
q1(q{SELECT outbox.configure_sink('null')});
$offset = -s $node->logfile;
wait_sealed($dead, $offset, "the dead letter's partition is sealed");
is(q1(qq{SELECT outbox.requeue('$dead')}), 't', 'requeued');
wait_published($node, qq{id = '$dead'}, 'the requeued event is published');

is(q1(q{SELECT count(*) FROM outbox.event_status WHERE published_at IS NULL}), '0', 'nothing is left unpublished');
$node->stop;
done_testing();
