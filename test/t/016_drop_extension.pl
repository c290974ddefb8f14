# DROP EXTENSION outbox and the events it would discard, the relay, and its sink.
#  - Refused (SQLSTATE 55000, with a way forward) while events are not published, also as
#    DROP SCHEMA outbox CASCADE; allowed with outbox.drop_discards_events = on.
#  - The relay forgets the dropped extension's sink: after DROP and CREATE EXTENSION it
#    sends nothing with the old one.
#  - DROP EXTENSION never deadlocks with a relay that is sending.
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
my $node = relay_node('drop', "deadlock_timeout = '50ms'\noutbox.batch_size = 100\n");

sub enqueue {
	my ($n, $tag) = @_;
	return split /\n/, $node->safe_psql('postgres',
		qq{SELECT unnest(outbox.enqueue_batch((SELECT jsonb_agg(jsonb_build_object(
		  'aggregatetype', 'order', 'aggregateid', (i % 7)::text, 'type', '$tag', 'payload', jsonb_build_object('i', i)))
		  FROM generate_series(1, $n) i)))});
}

# 1. Undelivered events (no sink yet): refused, nothing dropped.
$node->safe_psql('postgres', 'CREATE EXTENSION outbox');
my @waiting = enqueue(25, 'waiting');
for my $drop ('DROP EXTENSION outbox', 'DROP SCHEMA outbox CASCADE') {
	my ($rc, $out, $err) = $node->psql('postgres', $drop, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	isnt($rc, 0, "$drop is refused");
	(my $tag = $drop) =~ s/ outbox.*//;
	like($err, qr/ERROR:  55000: outbox: $tag would discard 25 events that were not published \(0 of them dead-lettered\)/,
		'... with SQLSTATE 55000 and the count');
	like($err, qr/HINT:  .*SET LOCAL outbox.drop_discards_events = on/, '... and the way forward');
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM outbox.events'), '25', 'no event was discarded');

# Delivered, the drop is allowed; or on purpose, with the setting.
$node->safe_psql('postgres', qq{SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "$bootstrap"}')});
wait_published($node, 'true', 'the waiting events are delivered');
my ($rc, $out, $err) = $node->psql('postgres', 'DROP EXTENSION outbox');
is($rc, 0, 'with every event delivered, DROP EXTENSION succeeds');
is($err, '', '... without a warning');
$node->safe_psql('postgres', 'DROP SCHEMA outbox; CREATE EXTENSION outbox');
enqueue(1, 'discarded');
($rc, $out, $err) = $node->psql('postgres', 'DROP EXTENSION outbox');
like($err, qr/ERROR:  outbox: DROP EXTENSION would discard 1 event that was not published \(0 of them/,
	'one event: refused, in the singular');
($rc, $out, $err) = $node->psql('postgres',
	'BEGIN; SET LOCAL outbox.drop_discards_events = on; DROP EXTENSION outbox; COMMIT;');
is($rc, 0, 'with outbox.drop_discards_events, DROP EXTENSION succeeds');
like($err, qr/WARNING:  outbox: DROP EXTENSION discards 1 event that was not published/, '... and says what it discarded');

# A dead letter holds the drop up, like any event not published; discarded
# (outbox.discard_dead()), it no longer does.
$node->safe_psql('postgres', 'DROP SCHEMA outbox; CREATE EXTENSION outbox');
enqueue(1, 'dead');
$node->safe_psql('postgres', q{UPDATE outbox.events SET dead_at = now(), attempts = 10, last_error = 'refused'});
($rc, $out, $err) = $node->psql('postgres', 'BEGIN; DROP EXTENSION outbox; ROLLBACK;');
like($err, qr/would discard 1 event that was not published \(1 of them dead-lettered\)/, 'a dead letter: refused');
is($node->safe_psql('postgres', q{SELECT outbox.discard_dead()}), '1', 'discarded');
($rc, $out, $err) = $node->psql('postgres', 'DROP EXTENSION outbox');
is($rc, 0, 'with the dead letter discarded, DROP EXTENSION succeeds');
is($err, '', '... without a warning');

# 2. The relay forgets the dropped extension's sink. The old one sent to Kafka; the new
#    installation has the null sink, and its events must not reach the topic.
$node->safe_psql('postgres', 'DROP SCHEMA outbox; CREATE EXTENSION outbox');
ok($node->poll_query_until('postgres', q{SELECT state = 'unconfigured' FROM outbox.status}),
	'after DROP and CREATE EXTENSION the relay has no sink');
$node->safe_psql('postgres', q{SELECT outbox.configure_sink('null')});
my @after = enqueue(10, 'after-recreate');
wait_published($node, q{type = 'after-recreate'}, 'the new installation delivers with its own sink');
my %in_topic = map { /id=([0-9a-f-]{36})/ ? ($1 => 1) : () } $mock->consume('outbox.event.order', '%h\n');
is(scalar(grep { $in_topic{$_} } @after), 0, 'none of its events went to the old sink');
is(scalar(grep { $in_topic{$_} } @waiting), 25, 'the old sink had delivered the first installation\'s events');

# 3. DROP EXTENSION while the relay sends: 8 rounds, each dropping the extension while the
#    relay waits for a slow broker (300 ms a request) in the middle of a batch transaction,
#    which ends by saving its low-water mark in outbox.relay_state. The drop takes
#    outbox.events' lock before any other, as the relay does, so neither waits for the other
#    in a cycle.
$mock->command('rtt -1 300');
my $log_offset = -s $node->logfile;
my $failed_drops = 0;
for my $round (1 .. 8) {
	$node->safe_psql('postgres', qq{SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "$bootstrap"}')});
	enqueue(2000, "round-$round");
	$node->poll_query_until('postgres', q{SELECT state = 'sending' FROM outbox.status});
	($rc, $out, $err) = $node->psql('postgres',
		'BEGIN; SET LOCAL outbox.drop_discards_events = on; DROP EXTENSION outbox; COMMIT;');
	$failed_drops++ if $rc != 0;
	diag("round $round: $err") if $rc != 0;
	$node->safe_psql('postgres', 'DROP SCHEMA IF EXISTS outbox; CREATE EXTENSION IF NOT EXISTS outbox');
}
$mock->command('rtt -1 0');
is($failed_drops, 0, 'every DROP EXTENSION during a batch succeeded');
my $log = slurp_file($node->logfile, $log_offset);
unlike($log, qr/deadlock detected/, 'no deadlock between DROP EXTENSION and the relay');
$node->safe_psql('postgres', q{SELECT outbox.configure_sink('null')});
my @last = enqueue(10, 'last');
wait_published($node, q{type = 'last'}, 'the relay delivers after all that');

$node->stop;
$mock->stop;
done_testing();
