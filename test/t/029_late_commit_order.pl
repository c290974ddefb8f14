# Per-key order across a late commit (outbox.ordering = key; one worker, which owns every
# shard, and two, which scan past each other's events): a transaction's
# first event of a key is passed over while the transaction is open (a gap), and its second
# event of that key lies above the relay's resume point. If the transaction commits while the
# relay sends a batch, the next (pipelined) fetch sees the second event as new, before any
# probe of the gaps has found the first. The relay must not send the second one first: it
# looks for committed events in its gaps after each fetch, stops the batch before the key,
# and sends the late one first. (Without that look, this test fails: n=2 is delivered
# before n=1.) The consumer is the null sink's record file.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

for my $workers (1, 2) {
my $others = 150 * $workers;    # the first batch of each worker is full (100)
my $node = PostgreSQL::Test::Cluster->new("late_order_$workers");
$node->init;
my $files = $node->basedir . '/sink_files';
mkdir $files, 0750 or die "mkdir $files: $!";
my $record_file = "$files/deliveries.tsv";
open my $fh, '>', $record_file or die "$record_file: $!";
close $fh;
chmod 0644, $record_file;    # the null sink refuses a private file (it could be a secret)
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'outbox'
outbox.database = 'postgres'
outbox.poll_interval = '200ms'
outbox.sink_files_directory = '$files'
outbox.batch_size = 100
outbox.workers = $workers
});
$node->start;
my $q1 = sub { return $node->safe_psql('postgres', $_[0]); };
$q1->('CREATE EXTENSION outbox');

# While no sink is configured: the open transaction's n=1, events of other keys, then
# its n=2 (above them in seq).
my $late = $node->background_psql('postgres');
$late->query_safe(q{BEGIN; SELECT outbox.enqueue('order', 'K', 'T', '{"n": 1}')});
$q1->(qq{SELECT count(outbox.enqueue('other', g::text, 'T', '{}')) FROM generate_series(1, $others) g});
$late->query_safe(q{SELECT outbox.enqueue('order', 'K', 'T', '{"n": 2}')});

# Each batch takes 1 s in the sink: the relay sends the first 100 others (passing over n=1)
# and, while it waits, the transaction commits; the next fetch then sees n=2 as new.
$q1->(q{SELECT outbox.configure_sink('null', '{"record_file": "deliveries.tsv", "delay_ms": "1000"}')});
ok($node->poll_query_until('postgres', "SELECT count(*) = $workers FROM outbox.status WHERE state = 'sending'"),
	"$workers worker(s): the relay sends its first batches while the transaction is open");
$late->query_safe('COMMIT');
$late->quit;
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM outbox.event_status WHERE published_at IS NULL}),
	"$workers worker(s): everything is delivered");

my @k = map { (split /\t/)[2] } grep { /^order\tK\t/ } split /\n/, slurp_file($record_file);
my %n = map { my ($id, $n) = split /\|/; ($id => $n) }
	split /\n/, $q1->(q{SELECT id || '|' || (payload->>'n') FROM outbox.events WHERE aggregateid = 'K'});
is(join(' ', map { $n{$_} } @k), '1 2', "$workers worker(s): key K: n=1 is delivered before n=2, once each");

$node->stop;
}
done_testing();
