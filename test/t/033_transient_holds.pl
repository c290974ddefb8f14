# A destination that fails some messages does not stall the stream (docs/design.md, "The
# relay", Failures). The null sink reports every 7th message it is offered unavailable
# (unavailable_every = 7), as a receiver that answers 503 now and then:
#  - every committed event is delivered (the record file's ids, as a set, are the committed
#    ids), and per key the first deliveries come in enqueue order;
#  - no attempt is used (max_attempts = 2 would dead-letter an event that failed twice), and
#    nothing is dead-lettered;
#  - the failed events hold their keys: outbox.status shows held keys with the error;
#  - the whole stream backs off only for a pass that delivered nothing (a retry alone in its
#    batch that fails again), and so never twice in a row: every 7th fails, the next succeeds.
# Then every message is unavailable (unavailable_every = 1): a pass delivers nothing, so the
# whole stream backs off, and no key is held nor any event touched; once the sink is healthy
# again everything is delivered.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $n_keys = 40;
my $per_key = 50;

my $node = PostgreSQL::Test::Cluster->new('transient_holds');
$node->init;
my $files = $node->basedir . '/sink_files';
mkdir $files, 0750 or die "mkdir $files: $!";
my $record_file = "$files/deliveries.tsv";
open my $fh, '>', $record_file or die "$record_file: $!";
close $fh;
chmod 0644, $record_file;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'outbox'
outbox.database = 'postgres'
outbox.poll_interval = '200ms'
outbox.sink_files_directory = '$files'
outbox.workers = 2
outbox.ordering = 'key'
outbox.batch_size = 20
outbox.max_attempts = 2
outbox.retry_backoff_min = '100ms'
outbox.retry_backoff_max = '400ms'
});
$node->start;
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1('CREATE EXTENSION outbox');

# The events: key k01..k40, n = 1..50 per key, enqueued in increasing n, 10 per transaction.
q1(q{CREATE TABLE expected (id uuid PRIMARY KEY, key text, n int)});
for my $lo (grep { $_ % 5 == 1 } 1 .. $per_key) {
	my $hi = $lo + 4;
	q1(qq{INSERT INTO expected
	  SELECT e.id, e.aggregateid, e.n FROM (
	    SELECT outbox.enqueue('order', 'k' || lpad(k::text, 2, '0'), 'Step',
	                          jsonb_build_object('n', n))::uuid AS id,
	           'k' || lpad(k::text, 2, '0') AS aggregateid, n
	      FROM generate_series($lo, $hi) n, generate_series(1, $n_keys) k
	     ORDER BY n, k) e});
}
is(q1('SELECT count(*) FROM expected'), $n_keys * $per_key, 'events committed');
# The sink comes after the events: the relay, which sends each commit at once, would
# otherwise be done before the watch below starts.
q1(q{SELECT outbox.configure_sink('null', '{"record_file": "deliveries.tsv", "unavailable_every": "7"}')});

# Watch outbox.status until everything is published: held keys show, with their error.
my ($held_seen, $held_error) = (0, '');
my $done = 0;
for (1 .. $PostgreSQL::Test::Utils::timeout_default * 10) {
	my ($unpublished, $held, $error) = split /\|/, q1(q{
	  SELECT max(unpublished), max(held_keys), max(oldest_held_error) FROM outbox.status});
	$held_seen = $held if $held > $held_seen;
	$held_error = $error if $error ne '' && $held_error eq '';
	if ($unpublished == 0) {
		$done = 1;
		last;
	}
	select(undef, undef, undef, 0.1);
}
ok($done, 'every event is published although every 7th message fails');
cmp_ok($held_seen, '>', 0, 'outbox.status showed held keys');
like($held_error, qr/unavailable/, 'with the error of the oldest held key');
ok(!$node->log_contains(qr/retrying in \d+ ms \(failure 2\)/),
	'the stream never backed off twice in a row');
is(q1('SELECT count(*) FROM outbox.events WHERE attempts > 0 OR dead_at IS NOT NULL'), '0',
	'no attempt used, nothing dead-lettered');
cmp_ok(q1('SELECT sum(events_failed) FROM outbox.status'), '>', 0,
	'the transient failures are counted in events_failed');
ok($node->log_contains('unavailable while others were delivered; their keys wait for a retry'),
	'the relay logs them');

# The consumer's side: the record file, one line per acknowledged message.
my %expected = map { my ($id, $key, $n) = split /\|/; ($id => [ $key, $n ]) }
  split /\n/, q1('SELECT id, key, n FROM expected');
sub deliveries {
	open my $in, '<', $record_file or die "$record_file: $!";
	my (%first, %order, @unknown);
	while (my $line = <$in>) {
		chomp $line;
		my ($type, $key, $id) = (split /\t/, $line)[ -4 .. -2 ];
		next if exists $first{$id};
		$first{$id} = 1;
		if (!$expected{$id}) { push @unknown, $id; next; }
		push @{ $order{ $expected{$id}[0] } }, $expected{$id}[1];
	}
	close $in;
	return (\%first, \%order, \@unknown);
}
my ($first, $order, $unknown) = deliveries();
is_deeply([ sort keys %$first ], [ sort keys %expected ], 'the delivered ids are the committed ids');
is(scalar(@$unknown), 0, 'nothing unknown was delivered');
my @inversions;
for my $key (sort keys %$order) {
	my @n = @{ $order->{$key} };
	for my $j (1 .. $#n) {
		if ($n[$j] <= $n[ $j - 1 ]) { push @inversions, "$key: n=$n[$j] after n=$n[$j-1]"; last; }
	}
}
is_deeply(\@inversions, [], 'per key, the first deliveries come in enqueue order');

# --- Every message unavailable: a pass delivers nothing, and only then the stream backs off.
q1(q{SELECT outbox.configure_sink('null', '{"record_file": "deliveries.tsv", "unavailable_every": "1"}')});
my $batch = q1(q{SELECT string_agg(outbox.enqueue('order', 'down' || i, 'T', '{}')::text, ',')
  FROM generate_series(1, 30) i});
ok( $node->poll_query_until('postgres', q{
	  SELECT bool_or(state = 'backoff' AND last_error LIKE 'sink unavailable:%') FROM outbox.status}),
	'with nothing delivered, the relay backs off the whole stream');
is(q1(q{SELECT count(*) FROM outbox.events
  WHERE aggregateid LIKE 'down%' AND (next_attempt_at IS NOT NULL OR attempts > 0)}), '0',
	'no key is held and no attempt used for an outage');
is(q1('SELECT max(held_keys) FROM outbox.status'), '0', 'outbox.status shows no held key');

q1(q{SELECT outbox.configure_sink('null', '{"record_file": "deliveries.tsv"}')});
OutboxNode::wait_published($node, q{aggregateid LIKE 'down%'}, 'after the outage everything goes out');
($first) = deliveries();
is_deeply([ grep { $first->{$_} } split /,/, $batch ], [ split /,/, $batch ],
	'every event of the outage was delivered');

$node->stop;
done_testing();
