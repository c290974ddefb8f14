# The consumer's inbox, end to end: the relay's http sink delivers 200 OrderCreated events,
# signed, to examples/python/inbox_consumer.py, which applies each in one transaction with
# outbox.inbox_receive() in a database of its own, as a role with only the documented grants.
# It loses the acknowledgement of every 7th request after its commit, so the relay sends those
# events again: the copies must be told and skipped. Compared as sets of event ids: every
# enqueued event recorded in the inbox once and applied once (the revenue per customer is the
# sum of the enqueued totals), and the copies are copies of enqueued events. Then by hand,
# after a restart of the consumer: a copy of an applied event is skipped, and a request with
# a bad signature is refused with 401 and records nothing.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use HTTP::Tiny;
use JSON::PP;
use MIME::Base64;
use Digest::SHA qw(hmac_sha256);
use Time::HiRes qw(usleep);
use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $example = "$FindBin::Bin/../../examples/python/inbox_consumer.py";
my $uuid = qr/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;

sub run_in {
	my ($cmd) = @_;
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run($cmd, '>', \$out, '2>', \$err, IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	};
	return ($ok, $out, $err || $@);
}

# The python3 first on PATH may lack Debian's psycopg (a pyenv, a virtualenv).
my ($python) = grep { (run_in([ $_, '-c', 'import psycopg' ]))[0] } ('python3', '/usr/bin/python3');
plan skip_all => 'no python3 with psycopg 3 (Debian: python3-psycopg)' unless $python;

# --- the signing secret, in outbox.sink_files_directory; the consumer reads the same file
my $work = PostgreSQL::Test::Utils::tempdir();
my $files = "$work/sink_files";
mkdir $files, 0750 or die "mkdir $files: $!";
my $key = join('', map { chr(int(rand(256))) } 1 .. 32);
my $secret_file = "$files/webhook.secret";
open my $fh, '>', $secret_file or die "$secret_file: $!";
print $fh 'whsec_' . encode_base64($key, '') . "\n";
close $fh;
chmod 0600, $secret_file;

# --- the server: the producer in database postgres, the consumer in database consumer
my $node = relay_node('inbox', qq{
outbox.retry_backoff_min = '50ms'
outbox.retry_backoff_max = '500ms'
outbox.sink_files_directory = '$files'
});
$node->safe_psql('postgres', 'CREATE EXTENSION outbox');
# The consumer's role owns its database (so it may create its table) and has on outbox only
# the grants of examples/README.md, run as pasted.
$node->safe_psql('postgres', 'CREATE ROLE inbox_consumer LOGIN; CREATE DATABASE consumer OWNER inbox_consumer');
$node->safe_psql('consumer', 'CREATE EXTENSION outbox');
my @grants = marked_blocks('examples/README.md', 'inbox-grants');
is(scalar(@grants), 1, 'examples/README.md has the grants block');
$node->safe_psql('consumer', $_) for @grants;
my $dsn = 'host=' . $node->host . ' port=' . $node->port . ' dbname=consumer user=inbox_consumer';

# --- the consumer: started with port 0, it prints the port it listens on
my ($consumer, $out_file, $starts);
END { $consumer->kill_kill if $consumer; }
sub start_consumer {
	my (@opts) = @_;
	$out_file = "$work/consumer." . ++$starts . '.out';
	$consumer = IPC::Run::start([ $python, $example, '--port', '0', '--secret-file', $secret_file, @opts, $dsn ],
		'>', $out_file, '2>>', "$work/consumer.err");
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	my $port;
	until ($port || time > $deadline) {
		usleep(50_000);
		($port) = (-e $out_file ? slurp_file($out_file) : '') =~ /^listening on 127\.0\.0\.1:(\d+)$/m;
	}
	die 'the consumer did not start: ' . slurp_file("$work/consumer.err") unless $port;
	return $port;
}
sub stop_consumer {
	$consumer->signal('TERM');
	$consumer->finish;
	undef $consumer;
}
# The consumer's lines (after "listening ..."): [outcome, event id, ack lost?] each.
sub consumer_lines {
	return [ map { /^(\w+) event=($uuid)( ack=lost)?$/ ? [ $1, $2, $3 ? 1 : 0 ] : [ $_, '', 0 ] }
		  grep { !/^listening on / } split /\n/, slurp_file($out_file) ];
}
sub consumer_ids {
	my ($sql) = @_;
	return [ sort split /\n/, $node->safe_psql('consumer', $sql) ];
}

my $port = start_consumer('--lose-ack-every', '7');
ok($port, "the consumer listens on 127.0.0.1:$port");
my $options = encode_json({ url => "http://127.0.0.1:$port/orders", secret_file => 'webhook.secret' });
$node->safe_psql('postgres', "SELECT outbox.configure_sink('http', '$options')");

# --- 200 OrderCreated events over 5 customers, in 4 transactions
my @enqueued;
for my $t (0 .. 3) {
	push @enqueued, split /\n/, $node->safe_psql('postgres', qq{
		SELECT outbox.enqueue('order', i::text, 'OrderCreated',
		           jsonb_build_object('order_id', i, 'customer', 'c' || i % 5,
		                              'total', ((i * 7919) % 100000 / 100.0)::numeric(12, 2)::text))
		  FROM generate_series($t * 50 + 1, $t * 50 + 50) i});
}
@enqueued = sort @enqueued;
is(scalar(@enqueued), 200, '200 events enqueued');
my $in = join(', ', map { "'$_'" } @enqueued);
wait_published($node, "id IN ($in)", 'the relay publishes them all to the consumer');

# --- what the consumer recorded, applied and printed
is_deeply(consumer_ids(q{SELECT event_id FROM outbox.inbox}), \@enqueued,
	'the inbox records every enqueued event exactly once');
is_deeply(consumer_ids(q{SELECT DISTINCT consumer FROM outbox.inbox}), ['revenue'], '... for the consumer "revenue"');
my $expected_revenue = $node->safe_psql('postgres', qq{
	SELECT string_agg(customer || ' ' || orders || ' ' || total, E'\n' ORDER BY customer)
	  FROM (SELECT payload->>'customer' AS customer, count(*) AS orders,
	               sum((payload->>'total')::numeric)::numeric(14, 2) AS total
	          FROM outbox.events WHERE id IN ($in) GROUP BY 1) s});
is($node->safe_psql('consumer', q{
	SELECT string_agg(customer || ' ' || orders || ' ' || total, E'\n' ORDER BY customer) FROM example_revenue}),
	$expected_revenue, 'the revenue per customer is each enqueued order counted once');

my $lines = consumer_lines();
is_deeply([ grep { $_->[1] eq '' } @$lines ], [], 'the consumer printed only applied and duplicate lines');
is_deeply([ sort map { $_->[1] } grep { $_->[0] eq 'applied' } @$lines ], \@enqueued,
	'it applied every enqueued event exactly once');
my %enqueued = map { $_ => 1 } @enqueued;
my %duplicate = map { $_->[1] => 1 } grep { $_->[0] eq 'duplicate' } @$lines;
my %lost = map { $_->[1] => 1 } grep { $_->[2] } @$lines;
cmp_ok(scalar(grep { $_->[2] } @$lines), '>=', int(200 / 7), 'it lost the acknowledgement of every 7th request');
ok(%duplicate, 'the relay sent those events again: the consumer printed duplicate lines');
is_deeply([ grep { !$enqueued{$_} } sort keys %duplicate ], [], '... of enqueued events only');
is_deeply([ grep { !$duplicate{$_} } sort keys %lost ], [], '... and each event whose acknowledgement was lost came again');
note(scalar(keys %duplicate) . ' events came twice or more, ' . scalar(keys %lost) . ' acknowledgements lost');

# --- by hand, after a restart: the inbox is in the database, not in the consumer's memory
stop_consumer();
$port = start_consumer();
my $http = HTTP::Tiny->new(no_proxy => '127.0.0.1', timeout => $PostgreSQL::Test::Utils::timeout_default);
# A Standard Webhooks request of an event, signed with $signing_key.
sub post_event {
	my ($id, $body, $signing_key) = @_;
	my $stamp = time;
	my $signature = encode_base64(hmac_sha256("$id.$stamp.$body", $signing_key), '');
	return $http->request('POST', "http://127.0.0.1:$port/orders", {
		headers => { 'content-type' => 'application/json', 'webhook-id' => $id, 'webhook-timestamp' => $stamp,
			'webhook-signature' => "v1,$signature", 'outbox-type' => 'OrderCreated' },
		content => $body });
}
my $revenue_before = $node->safe_psql('consumer', 'SELECT sum(total) FROM example_revenue');
my $again = $enqueued[0];
my $payload = $node->safe_psql('postgres', qq{SELECT payload::text FROM outbox.events WHERE id = '$again'});
my $response = post_event($again, $payload, $key);
is($response->{status}, 200, 'a copy sent by hand is acknowledged');
my $fresh = $node->safe_psql('postgres', 'SELECT gen_random_uuid()');
$response = post_event($fresh, $payload, 'not the secret');
is($response->{status}, 401, 'a request with a bad signature is refused with 401');
is_deeply(consumer_lines(), [ [ 'duplicate', $again, 0 ], [ 'rejected: bad signature', '', 0 ] ],
	'... the copy was told as such, the forgery rejected');
is($node->safe_psql('consumer', 'SELECT sum(total) FROM example_revenue'), $revenue_before, '... the revenue is unchanged');
is_deeply(consumer_ids(q{SELECT event_id FROM outbox.inbox}), \@enqueued, '... and so is the inbox');

stop_consumer();
$node->stop;
done_testing();
