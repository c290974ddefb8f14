# The relay with the HTTP webhook sink, against an independent receiver
# (test/consumers/webhook_receiver.js: the standardwebhooks and cloudevents npm packages
# verify and read every request). The signing secret comes from a secret file and never
# shows. Under each fault (receiver down and back, 500s, 503 with Retry-After, 410, a
# redirect, 1 request in 7 answered 503, an untrusted certificate) the ids delivered are compared as sets with the ids
# enqueued, and an outage burns no attempt.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use JSON::PP;
use MIME::Base64;
use Time::HiRes qw(usleep);

use FindBin;
use lib $FindBin::Bin;
use OutboxNode;
use Consumers;

sub run_in {
	my ($cmd, $dir) = @_;
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run($cmd, init => sub { chdir $dir or die "chdir $dir: $!" if defined $dir; },
			'>', \$out, '2>', \$err, IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	};
	return ($ok, $out, $err || $@);
}

plan skip_all => 'no node (Debian: nodejs)' unless (run_in([ 'node', '--version' ]))[0];
plan skip_all => 'no openssl (Debian: openssl)' unless (run_in([ 'openssl', 'version' ]))[0];
my $work = PostgreSQL::Test::Utils::tempdir();
my ($consumers, $why) = Consumers::dir();
plan skip_all => $why unless $consumers;
my ($ok, $out, $err);

# --- files: the signing secret and a self-signed certificate for 127.0.0.1
my $files = "$work/sink_files";
mkdir $files, 0750 or die "mkdir $files: $!";
my $key_bytes = join('', map { chr(int(rand(256))) } 1 .. 32);
my $secret = 'whsec_' . encode_base64($key_bytes, '');
my $next_secret = 'whsec_' . encode_base64(join('', map { chr(int(rand(256))) } 1 .. 32), '');
sub write_file {
	my ($path, $content, $mode) = @_;
	open my $fh, '>', $path or die "$path: $!";
	print $fh $content;
	close $fh;
	chmod $mode, $path;
}
write_file("$files/webhook.secret", "$secret\n", 0600);
# A rotation: the new secret beside the old one.
write_file("$files/rotation.secret", "$next_secret\n$secret\n", 0600);
($ok, $out, $err) = run_in([ 'openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2',
	'-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1',
	'-keyout', "$work/receiver.key", '-out', "$work/receiver.crt" ]);
die "openssl: $err" unless $ok;
write_file("$files/receiver.crt", slurp_file("$work/receiver.crt"), 0644);

# --- the receiver
my $log = "$work/receiver.log";
my $control = "$work/control.json";
write_file($log, '', 0644);
my $starts = 0;
sub start_receiver {
	my (%opt) = @_;
	my $port_file = "$work/port." . ++$starts;
	my @cmd = ('node', "$consumers/webhook_receiver.js", '--log', $log, '--port-file', $port_file,
		'--control', $control, '--secret', $secret, '--secret', $next_secret, '--port', $opt{port} // 0);
	push @cmd, '--cert', "$work/receiver.crt", '--key', "$work/receiver.key" if $opt{tls};
	my $h = IPC::Run::start(\@cmd, '>>', "$work/receiver.out", '2>>', "$work/receiver.err");
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	usleep(50_000) until -s $port_file || time > $deadline;
	die 'the receiver did not start: ' . slurp_file("$work/receiver.err") unless -s $port_file;
	return ($h, slurp_file($port_file));
}
sub stop_receiver {
	my ($h) = @_;
	$h->signal('TERM');
	$h->finish;
}
sub control {
	my (@rules) = @_;
	write_file("$control.tmp", encode_json({ rules => \@rules }), 0644);
	rename "$control.tmp", $control or die "rename: $!";
}
# Every request the receiver logged, oldest first.
sub received {
	return [ map { decode_json($_) } grep { /\S/ } split /\n/, slurp_file($log) ];
}

control();
my ($receiver, $port) = start_receiver();
ok($port, "receiver on 127.0.0.1:$port");

# --- the server
my $node = relay_node('http', qq{
outbox.send_timeout = '5s'
outbox.retry_backoff_min = '50ms'
outbox.retry_backoff_max = '500ms'
outbox.max_attempts = 2
outbox.sink_files_directory = '$files'
log_min_error_statement = error
});
$node->safe_psql('postgres', 'CREATE EXTENSION outbox; CREATE ROLE watcher LOGIN IN ROLE pg_monitor;');
sub configure {
	my ($url, %more) = @_;
	my %options = (url => $url, secret_file => 'webhook.secret', 'timeout.ms' => '3000', %more);
	my $json = encode_json(\%options);
	return $node->safe_psql('postgres', "SELECT outbox.configure_sink('http', '$json')");
}
my $url = "http://127.0.0.1:$port/hooks/" . '${aggregatetype}/${aggregateid}';
my $description = configure($url);
is($description,
	"http url=$url timeout.ms=3000 max_concurrency=8 straggler.timeout.ms=200 signed (1 secret)",
	'configured: the description names no secret');

# Bad options are refused by configure_sink, saying why, and never echo a secret.
write_file("$files/bad.secret", "not-a-whsec-secret-XYZZY\n", 0600);
for my $case (
	[ { url => 'ftp://127.0.0.1/x' }, qr/url: must start with http:\/\/ or https:\/\// ],
	[ { url => 'http://${aggregatetype}.example/' }, qr/placeholders are allowed in the path and query only/ ],
	[ { url => 'http://127.0.0.1/${nope}' }, qr/unknown placeholder \$\{nope\}/ ],
	[ { url => $url, secret_file => 'bad.secret' }, qr/the 1st secret in the file does not start with whsec_/ ],
	[ { url => $url, 'max_concurrency' => '0' }, qr/max_concurrency must be between 1 and 256/ ],
	[ { url => $url, 'proxy' => 'http://x' }, qr/sink "http" has no option "proxy"/ ])
{
	my ($options, $why) = @$case;
	my $json = encode_json($options);
	my ($rc, $stdout, $stderr) = $node->psql('postgres', "SELECT outbox.configure_sink('http', '$json')");
	isnt($rc, 0, "refused: $json");
	like($stderr, $why, '... saying why');
	unlike($stderr, qr/XYZZY/, '... without the secret');
}
my $config = $node->safe_psql('postgres', q{SELECT c::text FROM outbox.sink_config c});
ok($config =~ /webhook\.secret/ && $config !~ /bad\.secret|proxy|nope/, 'the configuration in force is unchanged');

my %enqueued;    # id -> [key, n]
my %per_key;
sub enqueue {
	my ($key, $tag) = @_;
	my $n = ++$per_key{$key};
	my $id = $node->safe_psql('postgres',
		qq{SELECT outbox.enqueue('order', '$key', 'OrderCreated', '{"n": $n, "tag": "$tag"}', '{"tenant": "t1", "bad name": "x"}')});
	$enqueued{$id} = [ $key, $n ];
	return $id;
}
sub wait_all_done {
	my ($what) = @_;
	ok( $node->poll_query_until('postgres',
			q{SELECT count(*) = 0 FROM outbox.event_status WHERE published_at IS NULL AND dead_at IS NULL}),
		$what);
}
# The receiver's acknowledged ids against every event published so far, every request's
# signature, and per key the order of first deliveries.
sub check_received {
	my ($what) = @_;
	my $rows = received();
	my (%acked, %first_n, $verified, $headers_ok);
	$verified = $headers_ok = 1;
	for my $r (@$rows) {
		my $id = $r->{webhook_id};
		$verified = 0 unless $r->{verified};
		next unless $enqueued{$id};
		my ($key, $n) = @{ $enqueued{$id} };
		$headers_ok = 0 unless ($r->{headers}{'outbox-header-tenant'} // '') eq 't1'
		  && !exists $r->{headers}{'outbox-header-bad name'}
		  && ($r->{headers}{'outbox-aggregateid'} // '') eq $key
		  && ($r->{headers}{'outbox-type'} // '') eq 'OrderCreated'
		  && $r->{url} eq "/hooks/order/$key";
		push @{ $first_n{$key} }, $n unless grep { $_ == $n } @{ $first_n{$key} // [] };
		$acked{$id} = 1 if $r->{status_returned} >= 200 && $r->{status_returned} < 300;
	}
	my $published = ids($node, q{SELECT id FROM outbox.event_status WHERE aggregatetype = 'order' AND published_at IS NOT NULL});
	is_deeply([ sort keys %acked ], $published, "$what: the ids acknowledged are the ids published");
	my @order_broken = grep { join(',', @{ $first_n{$_} }) ne join(',', sort { $a <=> $b } @{ $first_n{$_} }) } keys %first_n;
	is_deeply(\@order_broken, [], "$what: per key, first deliveries in enqueue order");
	ok($verified, "$what: every request's signature verified by standardwebhooks");
	ok($headers_ok, "$what: outbox-* headers and the URL; no header with a bad name");
	return $rows;
}

# 1. Plain delivery over several keys.
enqueue('k' . ($_ % 6), 'plain') for 1 .. 60;
wait_all_done('plain: all published');
check_received('plain');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE published_at IS NOT NULL}),
	[ sort keys %enqueued ], 'plain: every enqueued id was published');
my %connections = map { $_->{remote_port} => 1 } @{ received() };
cmp_ok(scalar(keys %connections), '<=', 8,
	'plain: 60 requests over at most max_concurrency (8) kept-alive connections');

# 2. The receiver is down, then back on the same port: nothing lost, no attempt burned.
stop_receiver($receiver);
my @outage = map { enqueue('k' . ($_ % 6), 'outage') } 1 .. 20;
ok( $node->poll_query_until('postgres', q{SELECT state = 'backoff' AND last_error LIKE '%http:%' FROM outbox.status}),
	'outage: the relay backs off and says why');
is($node->safe_psql('postgres', q{SELECT count(*) FROM outbox.event_status WHERE payload->>'tag' = 'outage' AND published_at IS NOT NULL}),
	'0', 'outage: nothing is published while the receiver is down');
($receiver) = start_receiver(port => $port);
wait_all_done('outage: all published once the receiver is back');
is($node->safe_psql('postgres', q{SELECT count(*) FROM outbox.events WHERE attempts > 0}), '0',
	'outage: no attempt was burned');
check_received('outage');

# 3. 500 twice, then OK: the same webhook-id each time, no attempt burned.
control({ match_key => '^k2$', status => 500, times => 2 });
my @five = map { enqueue("k$_", 'five-hundred') } 1 .. 3;
wait_all_done('500 then OK: all published');
my $tries = [ map { $_->{status_returned} } grep { $_->{webhook_id} eq $five[1] } @{ received() } ];
is_deeply($tries, [ 500, 500, 200 ], '500 then OK: the same webhook-id was sent again until acknowledged');
is($node->safe_psql('postgres', qq{SELECT attempts FROM outbox.events WHERE id = '$five[1]'}), '0',
	'500 then OK: no attempt burned');
check_received('500 then OK');

# 4. 503 with Retry-After: 2: the relay waits that long, and says so.
control({ status => 503, times => 1, retry_after => '2' });
my $waited = enqueue('k1', 'retry-after');
ok( $node->poll_query_until('postgres', q{SELECT last_error LIKE '%the receiver asked to wait until%' FROM outbox.status}),
	'Retry-After: the status says the receiver asked to wait');
wait_all_done('Retry-After: published after the wait');
my @times = map { $_->{received_ms} } grep { $_->{webhook_id} eq $waited } @{ received() };
is(scalar(@times), 2, 'Retry-After: one refused request, one acknowledged');
cmp_ok($times[1] - $times[0], '>=', 1000, 'Retry-After: the next request waited (at least a second)');
check_received('Retry-After');

# 5. 410 for one key: its event is dead-lettered after max_attempts, other keys flow.
control({ match_key => '^gone$', status => 410 });
my $gone = enqueue('gone', 'gone');
my @beside = map { enqueue("k$_", 'beside-gone') } 1 .. 5;
ok($node->poll_query_until('postgres', qq{SELECT dead_at IS NOT NULL FROM outbox.events WHERE id = '$gone'}),
	'410: dead-lettered');
like($node->safe_psql('postgres', qq{SELECT attempts || ' ' || last_error FROM outbox.events WHERE id = '$gone'}),
	qr/^2 http: the receiver answered 410: status 410 from the test receiver/, '410: attempts and the reason recorded');
delete $enqueued{$gone};
wait_all_done('410: the other keys are published');
check_received('410');

# 6. A redirect is not followed: rejected, the error names the Location.
control({ match_key => '^moved$', status => 302, location => 'http://127.0.0.1:1/elsewhere' });
my $moved = enqueue('moved', 'moved');
ok($node->poll_query_until('postgres', qq{SELECT dead_at IS NOT NULL FROM outbox.events WHERE id = '$moved'}),
	'redirect: dead-lettered');
like($node->safe_psql('postgres', qq{SELECT last_error FROM outbox.events WHERE id = '$moved'}),
	qr{a redirect to http://127\.0\.0\.1:1/elsewhere, not followed}, 'redirect: the error names the Location');
delete $enqueued{$moved};
control();

# 6b. A flaky receiver: 1 request in 7 answered 503, 500 events over 11 keys.
#    Every event delivered, signed, per key in order, no attempt used; the failed events hold
#    only their keys (outbox.status shows them).
control({ every => 7, status => 503 });
my $flaky_from = $node->safe_psql('postgres', 'SELECT max(seq) FROM outbox.events');
# In one transaction: the relay's batches then hold many keys, so a 503 fails one event
# among delivered ones (a batch whose events all fail backs off the whole stream instead).
for my $row (split /\n/, $node->safe_psql('postgres', q{
	SELECT outbox.enqueue('order', k, 'OrderCreated', jsonb_build_object('n', n, 'tag', 'flaky'),
	                      '{"tenant": "t1", "bad name": "x"}') || ' ' || k || ' ' || n
	  FROM (SELECT 'f' || (i % 11) AS k, row_number() OVER (PARTITION BY i % 11 ORDER BY i) AS n
	          FROM generate_series(1, 500) i ORDER BY i) s}))
{
	my ($id, $key, $n) = split / /, $row;
	$enqueued{$id} = [ $key, $n ];
	$per_key{$key} = $n;
}
ok( $node->poll_query_until('postgres', q{SELECT held_keys > 0 FROM outbox.status}),
	'flaky: outbox.status shows held keys');
like($node->safe_psql('postgres', q{SELECT oldest_held_error FROM outbox.status}), qr/503|^$/,
	'flaky: with the oldest held key\'s error');
wait_all_done('flaky: all published');
is($node->safe_psql('postgres', qq{SELECT count(*) FROM outbox.events WHERE seq > $flaky_from AND attempts > 0}),
	'0', 'flaky: no attempt used');
cmp_ok(scalar(grep { $_->{status_returned} == 503 } @{ received() }), '>=', 500 / 7 - 1,
	'flaky: the receiver did answer 503s');
check_received('flaky');
control();

# 7. https with a self-signed certificate: refused by default, delivered with tls.ca_file.
my ($tls_receiver, $tls_port) = start_receiver(tls => 1);
my $tls_url = "https://127.0.0.1:$tls_port/hooks/" . '${aggregatetype}/${aggregateid}';
configure($tls_url);
my $tls_id = enqueue('k1', 'tls');
ok( $node->poll_query_until('postgres', q{SELECT state = 'backoff' AND last_error LIKE '%certificate%' FROM outbox.status}),
	'https: an untrusted certificate is refused with the default tls.verify')
  or diag($node->safe_psql('postgres', 'SELECT last_error FROM outbox.status'));
is($node->safe_psql('postgres', qq{SELECT published_at IS NULL AND attempts = 0 FROM outbox.event_status WHERE id = '$tls_id'}),
	't', 'https: not published, no attempt burned');
configure($tls_url, 'tls.ca_file' => 'receiver.crt');
wait_all_done('https: delivered with tls.ca_file');
check_received('https');

# 8. CloudEvents binary mode, read with the cloudevents SDK (HTTP.toEvent); through
#    "localhost", so the relay resolves a name (curl's resolver thread).
configure("http://localhost:$port/hooks/" . '${aggregatetype}/${aggregateid}',
	cloudevents => 'true', 'cloudevents.source' => '/shop');
my $ce_id = enqueue('k3', 'cloudevents');
wait_all_done('cloudevents: published');
my ($ce) = grep { $_->{webhook_id} eq $ce_id } @{ received() };
my $expected_time = $node->safe_psql('postgres',
	qq{SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS') FROM outbox.events WHERE id = '$ce_id'});
is_deeply(
	{ map { $_ => $ce->{cloudevent}{$_} } qw(id type source subject specversion) },
	{ id => $ce_id, type => 'OrderCreated', source => '/shop', subject => 'k3', specversion => '1.0' },
	'cloudevents: id, type, source, subject as the SDK reads them');
is(substr($ce->{cloudevent}{time} // '', 0, 23), $expected_time, 'cloudevents: time is the enqueue time');
ok($ce->{verified}, 'cloudevents: signed too');
check_received('cloudevents');

# 9. A rotation: the secret file holds the new and the old secret; each request carries a
#    signature of each, and a receiver that knows either one accepts it.
configure($url, secret_file => 'rotation.secret');
my $rotated = enqueue('k4', 'rotation');
wait_all_done('rotation: published');
my ($r) = grep { $_->{webhook_id} eq $rotated } @{ received() };
is_deeply($r->{verified_each}, [ JSON::PP::true, JSON::PP::true ], 'rotation: verified with the old and with the new secret');
is(scalar(split / /, $r->{headers}{'webhook-signature'}), 2, 'rotation: two signatures');
my ($plain_one) = @{ received() };
is_deeply($plain_one->{verified_each}, [ JSON::PP::true, JSON::PP::false ], 'before the rotation: signed with the old secret only');
check_received('rotation');

# A token in the URL's query: configure_sink's owner sees it in outbox.sink_config; the
# description that outbox.status and outbox.cluster_status show pg_monitor redacts it.
my $token = 'tok-5f0c2a9e71d4';
configure("$url?api_key=$token&key=" . '${aggregateid}', secret_file => 'rotation.secret');
ok( $node->poll_query_until('postgres', q{SELECT sink LIKE '%api_key=[redacted]%' FROM outbox.status}),
	'the query\'s token is redacted from the description');
my $shown = $node->safe_psql('postgres',
	q{SET ROLE watcher; SELECT string_agg(s.sink, E'\n') FROM outbox.status s
	  UNION ALL SELECT string_agg(c.sink, E'\n') FROM outbox.cluster_status c});
like($shown, qr/\?api_key=\[redacted\]&key=\$\{aggregateid\}/, '... a placeholder is shown');
unlike($shown, qr/\Q$token\E/, '... in outbox.status and outbox.cluster_status');
configure($url, secret_file => 'rotation.secret');

# The secret never shows.
my %channels;
$channels{'pg_stat_activity (pg_monitor)'} = $node->safe_psql('postgres',
	q{SET ROLE watcher; SELECT string_agg(coalesce(query, ''), E'\n') FROM pg_stat_activity});
$channels{'outbox.status (pg_monitor)'} = $node->safe_psql('postgres',
	q{SET ROLE watcher; SELECT string_agg(s::text, E'\n') FROM outbox.status s});
$channels{'outbox.sink_config'} = $node->safe_psql('postgres',
	q{SELECT string_agg(c::text, E'\n') FROM outbox.sink_config c});
$channels{'events.last_error'} = $node->safe_psql('postgres',
	q{SELECT string_agg(coalesce(last_error, ''), E'\n') FROM outbox.events});
like($channels{'outbox.sink_config'}, qr/rotation\.secret/, 'sink_config names the secret file');
$node->stop;
$channels{'server log'} = slurp_file($node->logfile);
for my $channel (sort keys %channels) {
	unlike($channels{$channel}, qr/\Q@{[ substr($secret, 6) ]}\E|\Q@{[ substr($next_secret, 6) ]}\E/,
		"no secret in $channel");
}

stop_receiver($tls_receiver);
stop_receiver($receiver);
done_testing();
