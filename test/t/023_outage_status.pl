# outbox.status tells the truth during an outage, before outbox.send_timeout (an hour here)
# runs out: the broker trouble the client sees shows as last_error while the batch waits.
# A new configure_sink takes effect at once, without waiting out the batch stuck on the dead
# broker; what that batch held is sent with the new sink. Ids compared as sets. The error
# stays in status for diagnosis, marked past (last_error_current) once the relay delivers.
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
my $node = relay_node('outage', "outbox.send_timeout = '1h'\n");
$node->safe_psql('postgres', 'CREATE EXTENSION outbox');
$node->safe_psql('postgres', qq{SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "$bootstrap"}')});
my $first = $node->safe_psql('postgres', q{SELECT outbox.enqueue('order', '1', 'T', '{}')});
wait_published($node, qq{id = '$first'}, 'delivered while the broker is up');

my $down_at = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
$mock->command('down -1');
my @stuck = split /\n/, $node->safe_psql('postgres',
	q{SELECT unnest(outbox.enqueue_batch((SELECT jsonb_agg(jsonb_build_object(
	   'aggregatetype', 'order', 'aggregateid', i::text, 'type', 'T', 'payload', '{}'::jsonb))
	   FROM generate_series(1, 50) i)))});
ok( $node->poll_query_until('postgres',
		qq{SELECT state = 'sending' AND last_error LIKE 'sink: %' AND last_error_at > '$down_at' FROM outbox.status}),
	'while the batch waits, status shows what the client sees');
my $error = $node->safe_psql('postgres', q{SELECT last_error FROM outbox.status});
like($error, qr/Connect|refused|down|transport/i, "... the broker trouble ($error)");
unlike($error, qr/PURGE/, '... not a consequence of it');
is($node->safe_psql('postgres',
		q{SELECT last_error_current, last_error_at IS NOT NULL FROM outbox.status}),
	't|t', '... current, with its time');
is($node->safe_psql('postgres',
		q{SELECT last_error_current, last_error IS NOT NULL FROM outbox.cluster_status}),
	't|t', '... in cluster_status too');

# A new sink takes over the stuck batch at once.
$node->safe_psql('postgres', q{SELECT outbox.configure_sink('null')});
wait_published($node, 'true', 'the new configuration delivers the stuck events');
is($node->safe_psql('postgres', q{SELECT sink FROM outbox.status}), 'null', 'with the new sink');
# Delivered since: the error is kept for diagnosis, with its time, and marked past (the
# relay publishes its counters just after the commit that the events' state shows).
ok( $node->poll_query_until('postgres',
		q{SELECT NOT last_error_current AND last_error IS NOT NULL
		         AND last_success_at > last_error_at FROM outbox.status}),
	'once delivered, the error is kept and marked past');
is($node->safe_psql('postgres', q{SELECT last_error_current FROM outbox.cluster_status}),
	'f', '... in cluster_status too');
is($node->safe_psql('postgres', q{SELECT last_error_current FROM outbox.relay_metrics}),
	'0', '... as the metric says');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE published_at IS NOT NULL}),
	[ sort($first, @stuck) ], 'every event is published');

$node->stop;
$mock->stop;
done_testing();
