# The relay with the Kafka sink, against librdkafka's mock cluster (a real Kafka protocol
# endpoint on 127.0.0.1, started here), read back by an independent consumer (kcat).
# Faults: request errors, all brokers down and up, a fatal producer error, a message the
# broker refuses. Under each, every event arrives (compared as sets of event ids), no
# attempt is burned by an outage, and the server is never restarted.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::Bin;
use KafkaMock;
use Consumers;
use JSON::PP;
use OutboxNode;

plan skip_all => 'no ' . KafkaMock::binary() unless -x KafkaMock::binary();

my $mock = KafkaMock->start(3);
my $bootstrap = $mock->bootstrap;
ok($bootstrap, "mock cluster at $bootstrap");

sub mock { $mock->command(@_); }

# Everything in a topic, as [partition, key, headers, payload] rows.
sub consume {
	my ($topic) = @_;
	return [ map { [ split /\t/, $_, 4 ] } $mock->consume($topic, '%p\t%k\t%h\t%s\n') ];
}

*header = \&KafkaMock::header;

# --- the server
my $node = relay_node('kafka', qq{
outbox.send_timeout = '3s'
outbox.retry_backoff_min = '50ms'
outbox.retry_backoff_max = '500ms'
outbox.max_attempts = 2
});
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
$node->safe_psql('postgres', 'CREATE EXTENSION outbox;');
my $description = $node->safe_psql('postgres',
	qq{SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "$bootstrap", "linger.ms": 5}')});
like($description, qr/kafka/, "configured: $description");

# A session that must survive every fault below (a relay dying by signal would end it).
my $bystander = $node->background_psql('postgres');
my $bystander_pid = $bystander->query_safe('SELECT pg_backend_pid()');

my %enqueued;    # id -> [key, n]
my %per_key;
sub enqueue_orders {
	my ($count, $tag) = @_;
	for my $i (1 .. $count) {
		my $key = 'k' . ($i % 7);
		my $n = ++$per_key{$key};
		my $id = $node->safe_psql('postgres',
			qq{SELECT outbox.enqueue('order', '$key', 'OrderCreated', '{"n": $n, "tag": "$tag"}', '{"tenant": "t1"}')});
		$enqueued{$id} = [ $key, $n ];
	}
}

sub wait_all_published {
	my ($what) = @_;
	ok( $node->poll_query_until('postgres',
			q{SELECT count(*) = 0 FROM outbox.event_status WHERE published_at IS NULL AND dead_at IS NULL}),
		$what);
}

# Checks the topic against every event enqueued so far: same id set, one partition per
# key, per-key order, headers and payload. Duplicates are allowed (at-least-once).
sub check_topic {
	my ($what) = @_;
	my $rows = consume('outbox.event.order');
	my (%seen, %partition_of, %last_n, $order_ok, $headers_ok);
	$order_ok = $headers_ok = 1;
	for my $r (@$rows) {
		my ($partition, $key, $headers, $payload) = @$r;
		my $id = header($headers, 'id') // '';
		$seen{$id}++;
		$headers_ok = 0 unless (header($headers, 'type') // '') eq 'OrderCreated'
		  && (header($headers, 'tenant') // '') eq 't1';
		$partition_of{$key}{$partition} = 1;
		my ($n) = $payload =~ /"n": (\d+)/;
		# Order per key: a number may repeat (a duplicate), never go back past one not seen.
		$order_ok = 0 if defined $last_n{$key} && $n < $last_n{$key} && !$seen{$id} > 1;
		$last_n{$key} = $n if !defined $last_n{$key} || $n > $last_n{$key};
	}
	my @missing = grep { !$seen{$_} } keys %enqueued;
	my @unknown = grep { !$enqueued{$_} } keys %seen;
	is(scalar(@missing), 0, "$what: every enqueued id is in the topic") or diag("missing @missing[0..2]");
	is(scalar(@unknown), 0, "$what: nothing else is in the topic");
	is(scalar(grep { keys %{ $partition_of{$_} } != 1 } keys %partition_of), 0,
		"$what: each key in exactly one partition");
	ok($headers_ok, "$what: headers id, type and the event's own");
	return scalar(@$rows);
}

# 1. Plain delivery.
enqueue_orders(140, 'plain');
wait_all_published('plain: all published');
my $count = check_topic('plain');
is($count, 140, 'plain: no duplicates without faults');
my $partitions = () = do { my %p = map { $_->[0] => 1 } @{ consume('outbox.event.order') }; keys %p };
ok($partitions > 1, "keys spread over $partitions partitions");

# 1b. The value of a message is the payload's text, byte for byte what payload::text gives
#     (the relay writes it itself, faster than the cast): escapes, every control character,
#     UTF-8, numbers as PostgreSQL prints them, nesting, top-level scalars, long strings.
my @corpus = (
	q{'{"a": 1, "b": [true, false, null], "c": {}, "d": [], "e": {"f": [{"g": "h"}]}}'::jsonb},
	q{to_jsonb((SELECT string_agg(chr(c), '' ORDER BY c) FROM generate_series(1, 127) c))},
	q{jsonb_build_object('key "with" ' || chr(92) || ' escapes' || chr(10), 'tab' || chr(9), 'unicode', 'Zürich ✓ 😀 ∑')},
	q{'{"escaped on input": "\u00e9 \" \\\\ \/ \b \f \n \r \t \u001f"}'::jsonb},
	q{'[0, -0, 1.0, 1e3, 1.5e-10, -1.23E+5, 123456789012345678901234567890.123456789]'::jsonb},
	q{'"just a string"'::jsonb}, q{'42'::jsonb}, q{'true'::jsonb}, q{'null'::jsonb}, q{'[]'::jsonb},
	q{jsonb_build_object('long', repeat('ab' || chr(10) || '"' || chr(92), 5000), 'after', 1)},
	q{jsonb_build_array(repeat('x', 8191) || chr(10) || repeat('y', 8191) || chr(1))},
	q{(SELECT jsonb_agg(jsonb_build_object('i', i, 's', chr(7) || i)) FROM generate_series(1, 3000) i)},
);
for my $i (0 .. $#corpus) {
	$node->safe_psql('postgres', "SELECT outbox.enqueue('payload', 'p$i', 'Text', $corpus[$i])");
}
wait_all_published('payload text: all published');
# By event id: the same set of ids on both sides, and for each id the same bytes.
my %expected = map { split /\|/, $_, 2 } split /\n/,
  $node->safe_psql('postgres', q{SELECT id, payload::text FROM outbox.events WHERE aggregatetype = 'payload'});
my %received = map { (header($_->[2], 'id') // '' => $_->[3]) } @{ consume('outbox.event.payload') };
is(scalar(keys %expected), scalar(@corpus), 'payload text: every payload was enqueued');
is(join(' ', sort keys %received), join(' ', sort keys %expected), 'payload text: the same event ids arrived');
my @differ = grep { ($received{$_} // '') ne $expected{$_} } sort keys %expected;
is(scalar(@differ), 0, 'payload text: each is byte for byte payload::text')
  or diag(join "\n", map { "$_: " . substr($received{$_} // '(none)', 0, 200) } @differ);

# 2. Transient request errors: librdkafka retries, the relay may back off; all arrive.
mock('errors Produce 6 NOT_ENOUGH_REPLICAS');
enqueue_orders(35, 'transient');
wait_all_published('transient errors: all published');
check_topic('transient errors');

# 3. Every broker down mid-stream: the relay backs off without burning attempts, then
#    delivers everything once the brokers are back.
mock('down -1');
enqueue_orders(35, 'outage');
ok( $node->poll_query_until('postgres', q{SELECT state = 'backoff' AND last_error LIKE 'sink unavailable%' FROM outbox.status}),
	'outage: the relay backs off and says why');
is($node->safe_psql('postgres', q{SELECT count(*) FROM outbox.event_status WHERE payload->>'tag' = 'outage' AND published_at IS NOT NULL}),
	'0', 'outage: nothing is marked published while the brokers are down');
ok( $node->poll_query_until('postgres',
		q{SELECT s.state = 'backoff' AND a.state = 'idle' AND a.backend_xmin IS NULL
		    FROM outbox.status s, pg_stat_activity a WHERE a.backend_type = 'outbox relay'}),
	'outage: while it backs off the relay holds no transaction and no snapshot');
mock('up -1');
wait_all_published('outage: all published after the brokers return');
is($node->safe_psql('postgres', q{SELECT count(*) FROM outbox.events WHERE attempts > 0}),
	'0', 'outage: no attempt was burned');
check_topic('outage');

# 3b. One partition without a leader: its keys are held, each on its own, while
#     the keys of the other partitions keep flowing; once the leader is back, the held keys
#     are delivered, in order, and no attempt is used.
my %partition_of_key = map { ($_->[1] => $_->[0]) } @{ consume('outbox.event.order') };
my ($stuck_key) = sort grep { $partition_of_key{$_} == 0 } keys %partition_of_key;
ok(defined $stuck_key, "a key on partition 0: $stuck_key");
mock('leader outbox.event.order 0 -1');
# In one transaction: the batches hold keys of every partition.
for my $row (split /\n/, $node->safe_psql('postgres', q{
	SELECT outbox.enqueue('order', k, 'OrderCreated', jsonb_build_object('n', n, 'tag', 'leaderless'),
	                      '{"tenant": "t1"}') || ' ' || k || ' ' || n
	  FROM (SELECT 'k' || (i % 7) AS k, i AS n FROM generate_series(1, 70) i ORDER BY i) s}))
{
	my ($id, $key, $i) = split / /, $row;
	my $n = ++$per_key{$key};
	$enqueued{$id} = [ $key, $n ];
}
# (The payload's n is the row number here; check_topic reads ids, partitions and headers.)
my @flowing = grep { $partition_of_key{$_} != 0 } map { "k$_" } 0 .. 6;
my $flowing_list = join(',', map { "'$_'" } @flowing);
ok( $node->poll_query_until('postgres', qq{
	  SELECT count(*) = 0 FROM outbox.event_status
	   WHERE payload->>'tag' = 'leaderless' AND aggregateid IN ($flowing_list) AND published_at IS NULL}),
	'leaderless: the keys of the other partitions are all published');
ok( $node->poll_query_until('postgres', q{
	  SELECT held_keys > 0 AND oldest_held_error LIKE '%no leader%' FROM outbox.status}),
	'leaderless: the keys of the partition are held, with the reason')
  or diag($node->safe_psql('postgres', 'SELECT held_keys, oldest_held_error, last_error FROM outbox.status'));
is($node->safe_psql('postgres', qq{SELECT count(*) FROM outbox.event_status
	  WHERE payload->>'tag' = 'leaderless' AND aggregateid = '$stuck_key' AND published_at IS NOT NULL}),
	'0', "leaderless: nothing of $stuck_key is published while its partition has no leader");
mock('leader outbox.event.order 0 1');
wait_all_published('leaderless: all published once the partition has a leader');
is($node->safe_psql('postgres', q{SELECT count(*) FROM outbox.events WHERE attempts > 0}),
	'0', 'leaderless: no attempt was burned');
check_topic('leaderless');
my @stuck_n = map { $_->[3] =~ /"n": (\d+)/ ? $1 : () }
  grep { $_->[1] eq $stuck_key && $_->[3] =~ /leaderless/ } @{ consume('outbox.event.order') };
my %first;
my @first_n = grep { !$first{$_}++ } @stuck_n;
is(scalar(@first_n), 10, "leaderless: each of ${stuck_key}'s 10 events arrived");
is_deeply(\@first_n, [ sort { $a <=> $b } @first_n ], "leaderless: ${stuck_key}'s events arrived in order");

# 4. A message the broker refuses (larger than message.max.bytes): it is dead-lettered after
#    max_attempts, and its neighbours, same key included, keep flowing.
$node->safe_psql('postgres',
	qq{SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "$bootstrap", "message.max.bytes": 10000}')});
my $big = $node->safe_psql('postgres',
	q{SELECT outbox.enqueue('order', 'k1', 'OrderCreated', jsonb_build_object('n', 0, 'blob', repeat('x', 20000)), '{"tenant": "t1"}')});
enqueue_orders(14, 'after-big');
ok( $node->poll_query_until('postgres', qq{SELECT dead_at IS NOT NULL FROM outbox.events WHERE id = '$big'}),
	'too large: dead-lettered');
is($node->safe_psql('postgres', qq{SELECT attempts || ' ' || (last_error LIKE '%too large%' OR last_error LIKE '%TOO_LARGE%') FROM outbox.events WHERE id = '$big'}),
	'2 true', 'too large: attempts and the reason are recorded')
  or diag($node->safe_psql('postgres', qq{SELECT last_error FROM outbox.events WHERE id = '$big'}));
wait_all_published('too large: the neighbours are published');
check_topic('too large');

# 5. A fatal producer error (the idempotent producer's sequence is broken): the sink is
#    recreated, the server is not restarted, everything arrives.
mock('errors Produce 1 OUT_OF_ORDER_SEQUENCE_NUMBER');
enqueue_orders(21, 'fatal');
wait_all_published('fatal error: all published');
check_topic('fatal error');

# 6. CloudEvents 1.0 binary mode: ce_* headers and content-type, parsed by the CloudEvents
#    SDK (test/consumers), not by our code.
SKIP: {
	my ($consumers, $why) = Consumers::dir();
	skip $why, 7 unless $consumers;
	$node->safe_psql('postgres', qq{SELECT outbox.configure_sink('kafka',
		'{"bootstrap.servers": "$bootstrap", "cloudevents": true, "cloudevents.source": "/shop/orders"}')});
	my %ce;
	for my $n (1 .. 3) {
		my $id = $node->safe_psql('postgres',
			qq{SELECT outbox.enqueue('ce', 'c$n', 'OrderShipped', '{"n": $n}', '{"tenant": "t1"}')});
		$ce{$id} = $node->safe_psql('postgres',
			qq{SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') FROM outbox.events WHERE id = '$id'});
	}
	wait_all_published('cloudevents: published');
	my @messages = map {
		my $m = decode_json($_);
		my %h = @{ $m->{headers} // [] };
		{ binding => 'kafka', headers => \%h, key => $m->{key}, body => $m->{payload} }
	} $mock->consume('outbox.event.ce', '');
	my @events = Consumers::cloudevents(@messages);
	is_deeply([ sort map { $_->{id} // $_->{error} } @events ], [ sort keys %ce ],
		'cloudevents: the SDK reads every event, its id = the event id');
	is_deeply([ sort map { $_->{time} } @events ], [ sort values %ce ], 'cloudevents: time = the enqueue time');
	is_deeply([ sort map { $_->{subject} } @events ], [ 'c1', 'c2', 'c3' ], 'cloudevents: subject = the aggregateid');
	is_deeply([ map { "$_->{specversion} $_->{type} $_->{source} $_->{datacontenttype}" } @events ],
		[ ('1.0 OrderShipped /shop/orders application/json') x 3 ], 'cloudevents: specversion, type, source, content type');
	is_deeply([ sort map { $_->{data}{n} } @events ], [ 1, 2, 3 ], 'cloudevents: data = the payload');
	is($messages[0]{headers}{tenant}, 't1', "cloudevents: the event's own headers are still there");
	my ($rc, $out, $err) = $node->psql('postgres', qq{SELECT outbox.configure_sink('kafka',
		'{"bootstrap.servers": "$bootstrap", "cloudevents.source": "/x"}')});
	like($err, qr/cloudevents.source: set only with cloudevents = true/, 'cloudevents: a source alone is refused');
}

# The server never restarted, and the bystander session is still there.
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started, 'the postmaster never restarted');
is($bystander->query_safe('SELECT pg_backend_pid()'), $bystander_pid, 'other sessions were not disturbed');
$bystander->quit;

my $status = $node->safe_psql('postgres', q{SELECT state, unpublished, dead_lettered FROM outbox.status});
is($status, 'idle|0|1', 'status: idle, nothing waiting, one dead letter');

$node->stop;
$mock->stop;
done_testing();
