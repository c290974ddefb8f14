# The relay with the NATS sink, against a nats-server with JetStream started here (free
# loopback port, temporary store), read back by an independent client (test/consumers,
# the nats and cloudevents npm packages). Compared as sets of event ids: every enqueued id
# is in the stream exactly once (Nats-Msg-Id de-duplicates the re-sends), in per-key order,
# with its subject and headers. Then: the relay killed between the PubAcks and the record of
# the delivery, nats-server stopped and restarted mid-run, a subject without a stream,
# CloudEvents mode.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use IO::Socket::INET;
use JSON::PP;
use Math::BigInt;
use Time::HiRes qw(usleep);
use FindBin;
use lib $FindBin::Bin;
use OutboxNode;
use Consumers;

# Runs a command (in $dir if given): (ok, stdout, stderr). A missing program is not ok.
sub run_in {
	my ($cmd, $dir) = @_;
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run($cmd, init => sub { chdir $dir or die "chdir $dir: $!" if defined $dir; },
			'>', \$out, '2>', \$err, IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	};
	$err .= $@ if $@;
	return ($ok, $out, $err);
}

plan skip_all => 'no nats-server (Debian: nats-server)' unless (run_in([ 'nats-server', '--version' ]))[0];
my ($consumers, $why) = Consumers::dir();
plan skip_all => $why unless $consumers;

# --- nats-server, on a free port with its own store; the same store across a restart.
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $store = PostgreSQL::Test::Utils::tempdir() . '/nats-store';
my $url = "nats://127.0.0.1:$port";
my $nats;

sub start_nats {
	$nats = IPC::Run::start([ 'nats-server', '-js', '-a', '127.0.0.1', '-p', $port, '-sd', $store ],
		'>', '/dev/null', '2>', "$store.log");
	for (1 .. 200) {
		return if IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp');
		usleep(50_000);
	}
	die "nats-server did not start on port $port";
}

sub stop_nats {
	return unless $nats;
	$nats->signal('TERM');
	$nats->finish;
	undef $nats;
}
END { stop_nats(); }

sub stream_cmd {
	my @args = @_;
	my ($ok, $out, $err) = run_in([ 'node', "$consumers/nats_stream.js", @args ]);
	die "nats_stream.js @args: $err" unless $ok;
	return [ map { decode_json($_) } grep { length } split /\n/, $out ];
}
sub add_stream { stream_cmd('add', $url, $_[0], $_[1], 600_000); }    # duplicate window 10 min
sub read_stream { return stream_cmd('read', $url, $_[0]); }

start_nats();
add_stream('OUTBOX', 'outbox.event.order,outbox.event.invoice');

# --- the server
my $node = relay_node('nats', qq{
outbox.send_timeout = '3s'
outbox.retry_backoff_min = '50ms'
outbox.retry_backoff_max = '500ms'
outbox.max_attempts = 2
restart_after_crash = on
});
$node->safe_psql('postgres', 'CREATE EXTENSION outbox;');
my $description = $node->safe_psql('postgres',
	qq{SELECT outbox.configure_sink('nats', '{"servers": "$url"}')});
like($description, qr/^nats servers=\Q$url\E subject\.template=outbox\.event\.\$\{aggregatetype\}/,
	"configured: $description");

my %enqueued;    # id -> { aggregatetype, aggregateid, n, type }
my %per_key;
# Enqueues $count events of $aggregatetype over 5 keys in one transaction; returns their ids.
sub enqueue {
	my ($aggregatetype, $count, $tag) = @_;
	my @rows;
	for my $i (1 .. $count) {
		my $key = 'k' . ($i % 5);
		my $n = ++$per_key{"$aggregatetype/$key"};
		push @rows, { aggregatetype => $aggregatetype, aggregateid => $key, type => "Created$tag",
			payload => { n => $n, tag => $tag }, headers => { tenant => 't1' } };
	}
	my $json = encode_json(\@rows);
	my @ids = split /\n/, $node->safe_psql('postgres', qq{SELECT unnest(outbox.enqueue_batch('$json'))});
	die 'enqueue_batch returned ' . scalar(@ids) . " ids for $count events" unless @ids == $count;
	for my $i (0 .. $#ids) {
		$enqueued{ $ids[$i] } = { %{ $rows[$i] }, n => $rows[$i]{payload}{n} };
	}
	return @ids;
}

sub wait_all_published {
	my ($what) = @_;
	ok( $node->poll_query_until('postgres',
			q{SELECT count(*) = 0 FROM outbox.event_status WHERE published_at IS NULL AND dead_at IS NULL}),
		$what);
}

# The stream against the events enqueued of these aggregatetypes: the same set of ids, each
# exactly once, the subject and headers of each, and per key the order enqueued.
sub check_stream {
	my ($what, $stream, @types) = @_;
	my %want = map { $_ => 1 } @types;
	my @expected = sort grep { $want{ $enqueued{$_}{aggregatetype} } } keys %enqueued;
	my $messages = read_stream($stream);
	my (%count, %last_n, @bad_headers, @out_of_order);
	for my $m (@$messages) {
		my $h = $m->{headers};
		my $id = $h->{'Nats-Msg-Id'}[0] // '';
		$count{$id}++;
		my $e = $enqueued{$id} or next;
		push @bad_headers, $id
		  unless ($h->{id}[0] // '') eq $id
		  && ($h->{type}[0] // '') eq $e->{type}
		  && ($h->{aggregatetype}[0] // '') eq $e->{aggregatetype}
		  && ($h->{aggregateid}[0] // '') eq $e->{aggregateid}
		  && ($h->{tenant}[0] // '') eq 't1'
		  && $m->{subject} eq "outbox.event.$e->{aggregatetype}"
		  && decode_json($m->{data})->{n} == $e->{n};
		my $key = "$e->{aggregatetype}/$e->{aggregateid}";
		push @out_of_order, $id if defined $last_n{$key} && $e->{n} < $last_n{$key};
		$last_n{$key} = $e->{n};
	}
	is_deeply([ sort keys %count ], \@expected, "$what: the stream's ids are the enqueued ids");
	is_deeply([ grep { $count{$_} != 1 } sort keys %count ], [], "$what: each exactly once");
	is_deeply(\@bad_headers, [], "$what: subject, headers and data of each");
	is_deeply(\@out_of_order, [], "$what: per-key order in stream sequence order");
}

# 1. Plain delivery over two subjects and several keys.
enqueue('order', 60, 'plain');
enqueue('invoice', 40, 'plain');
wait_all_published('plain: all published');
check_stream('plain', 'OUTBOX', 'order', 'invoice');

# cnats' threads in the relay (reader, flusher, the PubAck subscription's, the library's
# timer and callback threads) run with PostgreSQL's signals blocked: the sink is created with
# every signal blocked, and send() blocks them around each publish (the first one starts the
# subscription's thread from the relay's own thread).
SKIP: {
	my $pid = $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'outbox relay'});
	skip 'no /proc', 2 unless -d "/proc/$pid/task";
	my %unblocked;
	my @threads = grep { $_ != $pid } map { m{/(\d+)$} ? $1 : () } glob("/proc/$pid/task/*");
	for my $tid (@threads) {
		my ($mask) = slurp_file("/proc/$pid/task/$tid/status") =~ /^SigBlk:\s*([0-9a-f]+)/m;
		my $bits = Math::BigInt->from_hex($mask // '0');
		for my $signal (1, 2, 3, 10, 12, 14, 15, 17) {    # HUP INT QUIT USR1 USR2 ALRM TERM CHLD
			$unblocked{$tid} = $mask if !$bits->copy->brsft($signal - 1)->band(1)->is_one;
		}
	}
	cmp_ok(scalar(@threads), '>=', 3, 'signals: the relay runs cnats threads (' . scalar(@threads) . ')');
	is_deeply(\%unblocked, {}, 'signals: every cnats thread of the relay has them blocked');
}

# 2 (c). A subject without a stream: a configuration error in outbox.status, no attempt
#    counted, nothing published; once the stream exists, everything is delivered.
my @shipments = enqueue('shipment', 20, 'nostream');
ok( $node->poll_query_until('postgres',
		q{SELECT last_error LIKE 'sink configuration error: %no JetStream stream stores subject "outbox.event.shipment"%nats stream add%' FROM outbox.status}),
	'no stream: outbox.status shows a configuration error naming the subject and the fix')
  or diag($node->safe_psql('postgres', 'SELECT last_error FROM outbox.status'));
my $shipment_list = join(', ', map { "'$_'" } @shipments);
is($node->safe_psql('postgres',
		qq{SELECT count(*) FILTER (WHERE published_at IS NULL AND attempts = 0 AND dead_at IS NULL)
		     FROM outbox.event_status WHERE id IN ($shipment_list)}),
	'20', 'no stream: the events stay unpublished with no attempt counted');

# 3 (a). Killed between the PubAcks and the record of the delivery. Another session holds the
#    delivery log locked, so the relay's INSERT blocks after the stream acknowledged the
#    batch; the relay is killed there, the postmaster restarts, the relay sends the batch
#    again, and the stream keeps one copy of each (Nats-Msg-Id within the duplicate window).
my $locker = $node->background_psql('postgres', on_error_stop => 0);
$locker->query_safe("BEGIN; LOCK TABLE outbox.deliveries IN EXCLUSIVE MODE;");
add_stream('SHIP', 'outbox.event.shipment');
ok( $node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE backend_type = 'outbox relay' AND wait_event_type = 'Lock'}),
	'killed before the record: the relay waits for the lock of the delivery log');
my %in_stream = map { ($_->{headers}{'Nats-Msg-Id'}[0] => 1) } @{ read_stream('SHIP') };
is_deeply([ sort grep { $in_stream{$_} } @shipments ], [ sort @shipments ],
	'killed before the record: the stream has acknowledged the whole batch');
is($node->safe_psql('postgres', qq{SELECT count(*) FROM outbox.event_status WHERE id IN ($shipment_list) AND published_at IS NOT NULL}),
	'0', 'killed before the record: none is published yet');
my $relay_pid = $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'outbox relay'});
kill 'KILL', $relay_pid;
eval { $locker->quit; };    # the postmaster ends it with every other session
wait_all_published('killed before the record: all published after the restart');
isnt($node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'outbox relay'}),
	$relay_pid, 'killed before the record: a new relay');
check_stream('killed before the record', 'SHIP', 'shipment');

# 4 (b). nats-server stopped mid-run and restarted with the same store while events keep
#    being enqueued: the relay reports the outage and backs off, nothing is lost or doubled.
enqueue('order', 30, 'before-stop');
stop_nats();
enqueue('order', 30, 'while-down');
enqueue('invoice', 20, 'while-down');
ok( $node->poll_query_until('postgres',
		q{SELECT state = 'backoff' AND last_error LIKE 'sink unavailable%' FROM outbox.status}),
	'server stopped: the relay backs off and says why')
  or diag($node->safe_psql('postgres', 'SELECT state, last_error FROM outbox.status'));
note('status while down: ' . $node->safe_psql('postgres', 'SELECT last_error FROM outbox.status'));
enqueue('order', 10, 'still-down');
start_nats();
enqueue('invoice', 20, 'after-restart');
wait_all_published('server restarted: all published');
is($node->safe_psql('postgres', q{SELECT count(*) FROM outbox.events WHERE attempts > 0}),
	'0', 'server restarted: no attempt was burned');
check_stream('server restarted', 'OUTBOX', 'order', 'invoice');

# 5 (d). CloudEvents mode, read with the cloudevents SDK (binary mode, the ce- headers).
add_stream('CE', 'outbox.event.ce');
$node->safe_psql('postgres',
	qq{SELECT outbox.configure_sink('nats', '{"servers": "$url", "cloudevents": "true", "cloudevents.source": "/shop"}')});
my @ce = enqueue('ce', 10, 'cloud');
wait_all_published('cloudevents: all published');
my %expected_ce = map { my ($id, $type, $subject, $time_ms, $time_us) = split /\|/; ($id => [ $type, $subject, $time_ms, $time_us ]) }
  split /\n/, $node->safe_psql('postgres', qq{
	SELECT id, type, aggregateid,
	       to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
	       to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
	  FROM outbox.events WHERE aggregatetype = 'ce'});
my $events = stream_cmd('ce', $url, 'CE');
is_deeply([ sort map { $_->{id} } @$events ], [ sort @ce ], 'cloudevents: the SDK reads every event id once');
my @wrong = grep {
	my $want = $expected_ce{ $_->{id} } // [];
	!($_->{type} eq ($want->[0] // '') && $_->{source} eq '/shop' && $_->{subject} eq ($want->[1] // '')
		&& $_->{time} eq ($want->[2] // '') && $_->{specversion} eq '1.0'
		&& $_->{datacontenttype} eq 'application/json' && ref $_->{data} eq 'HASH')
} @$events;
is_deeply([ map { $_->{id} } @wrong ], [], 'cloudevents: type, source, subject, time, data as the SDK reads them')
  or diag(explain(\@wrong));
my %raw_time = map { ($_->{headers}{'ce-id'}[0] => $_->{headers}{'ce-time'}[0]) } @{ read_stream('CE') };
is_deeply([ grep { ($raw_time{$_} // '') ne $expected_ce{$_}[3] } sort @ce ], [],
	'cloudevents: ce-time is created_at in RFC 3339 UTC with microseconds');

is($node->safe_psql('postgres', q{SELECT state, unpublished, dead_lettered FROM outbox.status}),
	'idle|0|0', 'status: idle, nothing waiting, no dead letter');
my $log = slurp_file($node->logfile);
like($log, qr/nats: (disconnected|reconnected)/, 'the sink\'s connection events reach the server log');

$node->stop;
stop_nats();
done_testing();
