# A commit wakes only the relay worker that owns its events' shards (docs/design.md, "Shards").
# enqueue computes the shard in C, the relay's queries with outbox.shard_of() in SQL: if the
# two differed, a commit would wake a worker that does not own its event, and the owner,
# with the poll at an hour, would not send it. So: two workers that own half of the shards
# each, one event per shard, each in a transaction of its own; every one is sent at once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $node = relay_node('wake_owner', "outbox.workers = 2\noutbox.poll_interval = '1h'\n");
sub q1 { return $node->safe_psql('postgres', $_[0]); }
q1('CREATE EXTENSION outbox');
q1(q{SELECT outbox.configure_sink('null')});

# The shards settle between the two workers (each claims its preferred half, and gives back
# the other's once it runs); rounds happen on passes, which commits start.
my $split = 0;
for (1 .. 60) {
	q1(q{SELECT outbox.enqueue('warm', 'w', 'T', '{}')});
	$split = q1(q{SELECT count(DISTINCT pid) = 2 AND count(*) = 64 AND max(n) = 32 FROM (
	  SELECT pid, count(*) OVER (PARTITION BY pid) AS n FROM pg_locks
	   WHERE locktype = 'advisory' AND objsubid = 28531 AND granted) l}) eq 't';
	last if $split;
	sleep 0.5;
}
ok($split, 'each worker owns 32 shards');
wait_published($node, 'true', 'the warm-up events are sent');

# One key per shard, by the SQL function.
my @keys = split /\n/, q1(q{
  SELECT DISTINCT ON (outbox.shard_of('order', k)) k
    FROM (SELECT 'k' || i AS k FROM generate_series(1, 2000) i) keys
   ORDER BY outbox.shard_of('order', k), k});
is(scalar @keys, 64, 'a key for every shard');
my @sent = sort map { q1(qq{SELECT outbox.enqueue('order', '$_', 'T', '{}')}) } @keys;

# A bound on a hang, not a timing: with the poll at an hour only the commit's wake-up sends.
my $deadline = time + 60;
my $left;
while (time < $deadline) {
	$left = q1(q{SELECT count(*) FROM outbox.event_status WHERE aggregatetype = 'order' AND published_at IS NULL});
	last if $left == 0;
	sleep 0.05;
}
is($left, 0, 'every shard\'s event is sent at its commit, with the poll at an hour');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE aggregatetype = 'order' AND published_at IS NOT NULL}),
	\@sent, 'the published ids are the enqueued ones');

done_testing();
