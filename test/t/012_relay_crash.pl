# Crashes at the worst moments for the relay: kill -9 of the worker while it holds a batch
# that the broker has not acknowledged, an immediate shutdown of the whole server
# mid-stream, and a fast shutdown while the broker is down. Nothing is lost; at most it is
# sent again. Compared as sets of event ids.
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
sub mock { $mock->command(@_); }

sub consumed_ids {
	my %ids;
	for my $line ($mock->consume('outbox.event.order', '%h\n')) {
		$ids{$1}++ if $line =~ /(?:^|,)id=([0-9a-f-]{36})/;
	}
	return \%ids;
}

my $node = relay_node('crash', qq{
outbox.send_timeout = '30s'
outbox.retry_backoff_min = '50ms'
outbox.retry_backoff_max = '500ms'
restart_after_crash = on
});
$node->safe_psql('postgres', 'CREATE EXTENSION outbox;');
$node->safe_psql('postgres', qq{SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "$bootstrap"}')});

# The relay has a batch in the sink's hands (here: waiting on brokers that are down).
sub wait_relay_sending {
	ok( $node->poll_query_until('postgres',
			q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'outbox relay' AND query LIKE 'outbox relay: sending%'}),
		'the relay is waiting on the broker with a batch');
}

my @enqueued;
sub enqueue {
	my ($n, $tag) = @_;
	push @enqueued, split /\n/, $node->safe_psql('postgres',
		qq{SELECT unnest(outbox.enqueue_batch((SELECT jsonb_agg(jsonb_build_object(
		  'aggregatetype', 'order', 'aggregateid', (i % 5)::text, 'type', '$tag', 'payload', jsonb_build_object('i', i)))
		  FROM generate_series(1, $n) i)))});
}

# 1. kill -9 of the relay while its batch waits for the broker (the worst moment: sent or
#    not, unmarked, transaction open).
enqueue(100, 'before');
ok($node->poll_query_until('postgres', q{SELECT unpublished = 0 FROM outbox.status}), 'first events delivered');
mock('down -1');
enqueue(200, 'in-flight');
wait_relay_sending();
my $relay_pid = $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'outbox relay'});
kill 'KILL', $relay_pid;
mock('up -1');
ok( $node->poll_query_until('postgres', q{SELECT unpublished = 0 AND state = 'idle' FROM outbox.status}),
	'after the crash and recovery, the relay delivers everything');

# 2. Immediate shutdown of the server mid-stream.
enqueue(3000, 'stream');
$node->stop('immediate');
$node->start;
ok($node->poll_query_until('postgres', q{SELECT unpublished = 0 FROM outbox.status}),
	'after an immediate shutdown and restart, everything is delivered');

# 3. A fast shutdown while a batch waits for a broker that is down. The relay stops waiting
#    at once (the sink's stop flag), not after outbox.send_timeout: with an hour's timeout,
#    pg_ctl would give up first and the stop would fail. What was not acknowledged stays
#    unpublished and is sent after the restart.
$node->append_conf('postgresql.conf', "outbox.send_timeout = '1h'");
$node->reload;
wait_relay_reloaded($node, { 'outbox.send_timeout' => 3600000 }, 'the relay waits an hour for the sink');
mock('down -1');
enqueue(200, 'at-shutdown');
wait_relay_sending();
my $log_offset = -s $node->logfile;
my $stop_started = time;
$node->stop('fast');
note('fast shutdown took ' . (time - $stop_started) . ' s with send_timeout = 1h');
my $shutdown_log = slurp_file($node->logfile, $log_offset);
unlike($shutdown_log, qr/retrying in/, 'the shutdown is not logged as an outage');
mock('up -1');
$node->start;
ok($node->poll_query_until('postgres', q{SELECT unpublished = 0 FROM outbox.status}),
	'after a fast shutdown during an outage, everything is delivered');

my $ids = consumed_ids();
my @lost = grep { !$ids->{$_} } @enqueued;
my %enqueued = map { $_ => 1 } @enqueued;
my @unknown = grep { !$enqueued{$_} } keys %$ids;
is(scalar(@enqueued), 3500, 'all events enqueued');
is(scalar(@lost), 0, 'no event lost across the crashes and the shutdown') or diag("lost @lost[0..2]");
is(scalar(@unknown), 0, 'no unknown event in the topic');
my $dups = grep { $ids->{$_} > 1 } keys %$ids;
note("duplicates after the crashes: $dups (allowed: at least once)");
is($node->safe_psql('postgres', q{SELECT count(*) FROM outbox.event_status WHERE published_at IS NULL}), '0',
	'every event is marked published');

# librdkafka's complaints about the brokers that were down reach the server log through the
# relay (with its prefix and log_line_prefix), not as raw lines on stderr.
my $server_log = slurp_file($node->logfile);
like($server_log, qr/(WARNING|LOG):  outbox relay 1: librdkafka FAIL: /,
	'librdkafka logs through the relay');
unlike($server_log, qr/^%\d\|/m, 'no raw librdkafka lines on stderr');

$node->stop;
$mock->stop;
done_testing();
