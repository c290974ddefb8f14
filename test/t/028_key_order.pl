# Per-key order with parallel relay workers (outbox.workers = 4, outbox.ordering = key):
# 100,000 events over 1,000 keys (aggregatetype 'order', aggregateid k0001..k1000, payload
# {"n": 1..100} per key), each key's events enqueued in increasing n by transactions that
# serialise on the key (one writer session owns each key). Meanwhile:
#  - the null sink rejects the first event it sees of key k0007 twice before it accepts it
#    (each sink instance counts anew, so after a worker restart it may be rejected again);
#  - one worker is ended (pg_terminate_backend) while it sends: its shards move to the
#    others and the launcher starts it again;
#  - one worker is killed (kill -9) while it sends: the postmaster restarts every process;
#  - the server restarts with outbox.workers = 2 and the last third is written.
# The consumer is independent of the relay: the null sink's record_file, one line per
# acknowledged message, appended by every worker. At least once: per key, the first delivery
# of each id counts (duplicates are counted, not failed). For every key the n of those first
# deliveries rise strictly (no inversion) and are exactly 1..100 (nothing missing), and the
# delivered ids are exactly the committed ones (compared as sets). A rejected event holds back
# the later events of its key only: nothing of another key is rejected, and other keys' later
# events are delivered while it waits.
#
# The relay is kept slower than the writers until the restart (batches of 50, a 50 ms sink),
# so that each disturbance finds events in flight; then batches of 1000 drain the rest.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use List::Util qw(min);
use Time::HiRes qw(usleep);

use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $n_keys = 1000;
my $per_key = 100;
my $n_writers = 4;    # writer w owns the keys k with k % $n_writers = w
my $step = 5;         # n values per key in one writer transaction (5 x 250 keys = 1250 events)
my $rejected_key = 'k0007';
my $shards = 64;

# --- The consumer's check. Self-contained (no file lexicals): exercised on synthetic logs too.
# $log: the record file's text, lines "aggregatetype\taggregateid\tid\ttype\n" in the order
# they were appended. $events: id => { at, key, type, n } for every committed event. Returns
# what it found; the caller asserts. A write that a killed worker left unfinished (no newline)
# is continued by the next append: the record is then the end of that line, and the torn
# fragment (of a batch that was never marked, so sent again) is ignored and counted.
sub check_deliveries {
	my ($log, $events, $per_key) = @_;
	my %r = (
		records => 0,
		duplicates => 0,
		torn => 0,
		malformed => [],
		unknown => [],
		mismatched => [],
		inversions => [],
		incomplete => [],
		undelivered => [],
		first => {});
	my @lines = split /\n/, $log, -1;
	my $tail = pop @lines;    # what follows the last newline: '' unless a write was cut short
	$r{torn}++ if defined $tail && $tail ne '';
	my %sequence;             # "aggregatetype/aggregateid" => [n of each first delivery, in order]
	for my $i (0 .. $#lines) {
		my @f = split /\t/, $lines[$i], -1;
		if (@f < 4) {
			push @{ $r{malformed} }, $lines[$i];
			next;
		}
		my ($at, $key, $id, $type) = @f[ -4 .. -1 ];
		my $e = $events->{$id};
		if (!$e) {
			push @{ $r{unknown} }, $id;
			next;
		}
		if ($key ne $e->{key} || $type ne $e->{type} || $at !~ /\Q$e->{at}\E\z/) {
			push @{ $r{mismatched} }, "$id recorded as $at/$key/$type, is $e->{at}/$e->{key}/$e->{type}";
			next;
		}
		$r{torn}++ if @f > 4 || $at ne $e->{at};
		$r{records}++;
		if (exists $r{first}{$id}) {
			$r{duplicates}++;
			next;
		}
		$r{first}{$id} = $i;
		push @{ $sequence{"$e->{at}/$e->{key}"} }, $e->{n};
	}
	my %keys = map { ("$_->{at}/$_->{key}" => 1) } values %$events;
	for my $k (sort keys %keys) {
		my @seq = @{ $sequence{$k} // [] };
		for my $j (1 .. $#seq) {
			if ($seq[$j] <= $seq[ $j - 1 ]) {
				push @{ $r{inversions} },
				  "$k: n=$seq[$j] delivered after n=$seq[$j - 1] (first deliveries: @seq[0 .. min($#seq, $j + 2)] ...)";
				last;
			}
		}
		my %got = map { ($_ => 1) } @seq;
		my @missing = grep { !$got{$_} } 1 .. $per_key;
		my @extra = grep { $_ < 1 || $_ > $per_key } @seq;
		push @{ $r{incomplete} },
		  "$k: " . scalar(@seq) . " of $per_key first deliveries"
		  . (@missing ? "; missing n=@missing[0 .. min($#missing, 9)]" : '')
		  . (@extra ? "; unexpected n=@extra[0 .. min($#extra, 9)]" : '')
		  if @missing || @extra || @seq != $per_key;
	}
	$r{undelivered} = [ sort grep { !exists $r{first}{$_} } keys %$events ];
	return \%r;
}

# Asserts that @$list is empty; shows its first few entries if not.
sub none_of {
	my ($list, $what) = @_;
	is(scalar(@$list), 0, $what)
	  or diag(join("\n", scalar(@$list) . ' of them, the first:', @$list[ 0 .. min($#$list, 4) ]));
}

# --- The server: the null sink records every acknowledged message in a file of
# outbox.sink_files_directory. Made as 018 makes its node (relay_node's settings, and the
# directory, which must be in the configuration when the relay starts).
my $node = PostgreSQL::Test::Cluster->new('key_order');
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
outbox.workers = 4
outbox.ordering = 'key'
outbox.batch_size = 50
outbox.max_attempts = 50
outbox.retry_backoff_min = '50ms'
outbox.retry_backoff_max = '500ms'
restart_after_crash = on
});
$node->start;
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1('CREATE EXTENSION outbox');
is(q1('SHOW outbox.ordering'), 'key', 'events are ordered per key');
q1(qq{SELECT outbox.configure_sink('null', '{"record_file": "deliveries.tsv", "reject_aggregateid": "$rejected_key",
  "reject_times": "2", "delay_ms": "50"}')});

# $n relay workers run, own the $shards shards between them, and none owns them all.
sub wait_workers {
	my ($n, $what, $not_pid) = @_;
	my $also = defined $not_pid ? "AND bool_and(pid <> $not_pid)" : '';
	my $ok = $node->poll_query_until('postgres', qq{
		SELECT count(*) = $n AND count(pid) = $n AND sum(shards) = $shards AND max(shards) < $shards $also
		  FROM outbox.status});
	ok($ok, $what);
	note('shards per worker: ' . q1(q{SELECT string_agg(worker || ':' || shards, ' ' ORDER BY worker) FROM outbox.status}));
}
wait_workers(4, '4 workers run and share the 64 shards');

# --- Writers: one session per writer, each committing its keys' next n values in order, one
# transaction per call ($step values of n for each of its 250 keys, in increasing n).
q1(qq{CREATE FUNCTION write_step(writer int, lo int, hi int) RETURNS int LANGUAGE sql AS \$\$
  SELECT cardinality(outbox.enqueue_batch((
    SELECT jsonb_agg(jsonb_build_object(
             'aggregatetype', 'order', 'aggregateid', 'k' || lpad(k::text, 4, '0'),
             'type', 'Step', 'payload', jsonb_build_object('n', n)) ORDER BY n, k)
      FROM generate_series(lo, hi) n, generate_series(1, $n_keys) k
     WHERE k % $n_writers = writer)))
\$\$});

my $committed = 0;
# Starts the writers on n = $from..$to and returns at once.
sub start_writers {
	my ($from, $to) = @_;
	my @sessions;
	for my $w (0 .. $n_writers - 1) {
		my $session = $node->background_psql('postgres');
		my $script = '';
		for (my $lo = $from; $lo <= $to; $lo += $step) {
			my $hi = min($lo + $step - 1, $to);
			$script .= "SELECT write_step($w, $lo, $hi);\n";
		}
		my $out = $session->query_until(qr/started/, "\\echo started\n$script");
		push @sessions, [ $session, $out ];
	}
	return { sessions => \@sessions, from => $from, to => $to };
}
# Waits for the writers to end; passes if every transaction committed its events.
sub finish_writers {
	my ($phase) = @_;
	my $events = 0;
	for my $s (@{ $phase->{sessions} }) {
		my ($session, $out) = @$s;
		$out .= "\n" . $session->query_safe(q{SELECT 'done'});    # psql runs the script first
		$session->quit;
		$events += $_ for ($out =~ /^(\d+)$/mg);
	}
	my $expected = $n_keys * ($phase->{to} - $phase->{from} + 1);
	is($events, $expected, "the writers committed n = $phase->{from}..$phase->{to}: $expected events");
	$committed += $events;
	is(q1('SELECT count(*) FROM outbox.events'), $committed, "$committed events in the table");
}

# A worker that is sending (its pid), ended: 'TERM' with pg_terminate_backend, 'KILL' with
# kill -9. Returns (worker, pid).
sub kill_sending_worker {
	my ($how) = @_;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline) {
		if ($how eq 'TERM') {
			my $victim = q1(q{
				SELECT worker || ' ' || pid
				  FROM (SELECT worker, pid FROM outbox.status
				         WHERE state = 'sending' AND pid IS NOT NULL ORDER BY worker LIMIT 1) v
				 WHERE pg_terminate_backend(pid)});
			return split / /, $victim if $victim ne '';
		} else {
			my $victim = q1(q{
				SELECT worker || ' ' || pid FROM outbox.status
				 WHERE state = 'sending' AND pid IS NOT NULL ORDER BY worker LIMIT 1});
			if ($victim ne '') {
				my ($worker, $pid) = split / /, $victim;
				return ($worker, $pid) if kill('KILL', $pid);
			}
		}
		usleep(20_000);
	}
	return;
}

sub note_backlog {
	note("$_[0]: " . q1(q{SELECT count(*) FROM outbox.event_status WHERE published_at IS NULL}) . ' events unpublished');
}

# --- Phase 1: n = 1..35 (35,000 events); a worker ended by pg_terminate_backend while it sends.
my $phase = start_writers(1, 35);
my ($ended_worker, $ended_pid) = kill_sending_worker('TERM');
ok(defined $ended_pid, 'a sending worker is ended with pg_terminate_backend')
  and note("ended worker $ended_worker (pid $ended_pid)");
note_backlog('after pg_terminate_backend');
finish_writers($phase);
wait_workers(4, 'its shards moved and the launcher started it again: 4 workers share the 64 shards',
	$ended_pid // 0);

# --- Phase 2: n = 36..65 (30,000 events); then kill -9 of a sending worker (no writer runs:
# the postmaster restarts every process).
$phase = start_writers(36, 65);
finish_writers($phase);
my $log_offset = -s $node->logfile;
my ($killed_worker, $killed_pid) = kill_sending_worker('KILL');
ok(defined $killed_pid, 'a sending worker is killed with kill -9')
  and note("killed worker $killed_worker (pid $killed_pid)");
$killed_pid //= 0;
ok($node->wait_for_log(qr/\(PID $killed_pid\) was terminated by signal 9/, $log_offset),
	'the postmaster saw it die');
ok($node->wait_for_log(qr/all server processes terminated; reinitializing/, $log_offset),
	'and restarts every process');
wait_workers(4, 'after the crash, 4 workers share the 64 shards', $killed_pid);

# --- Phase 3: restart with 2 workers (while events are in flight, probably), n = 66..100
# (35,000 events).
note_backlog('before the restart');
$node->append_conf('postgresql.conf', "outbox.workers = 2\noutbox.batch_size = 1000\n");
$node->restart;
wait_workers(2, 'after the restart with outbox.workers = 2, 2 workers share the 64 shards');
$phase = start_writers(66, 100);
finish_writers($phase);
is($committed, $n_keys * $per_key, '100,000 events committed');

wait_published($node, 'dead_at IS NULL', 'every event is published')
  or diag(q1(q{
		SELECT format('%s unpublished; first: %s', count(*),
		              string_agg(format('seq %s shard %s %s/%s n=%s %s attempts %s next %s', seq,
		                                outbox.shard_of(aggregatetype, aggregateid), aggregatetype, aggregateid,
		                                payload->>'n', state, attempts, next_attempt_at), '; ' ORDER BY seq)
		                FILTER (WHERE rn <= 10))
		  FROM (SELECT *, row_number() OVER (ORDER BY seq) rn FROM outbox.event_status
		         WHERE published_at IS NULL AND dead_at IS NULL) e})
	  . "\nmarks: " . q1(q{SELECT (SELECT low_water FROM outbox.relay_state) || ' state; shards '
	                         || string_agg(shard || ':' || low_water, ' ' ORDER BY shard) FROM outbox.relay_shards})
	  . "\nstatus: " . q1(q{SELECT string_agg(format('%s pid %s %s shards %s sent %s err %s', worker, pid, state,
	                                                shards, events_sent, last_error), E'\n' ORDER BY worker)
	                         FROM outbox.status}));
is(q1(q{SELECT count(*) FROM outbox.events WHERE dead_at IS NOT NULL}), '0', 'none is dead-lettered');
is(q1(q{SELECT count(*) FROM outbox.status WHERE pid IS NOT NULL}), '2', 'still 2 workers');

# --- The writers' premise: per key, n = 1..100 once each, enqueued (seq) in increasing n.
is( q1(qq{
		SELECT count(*) FROM (
		  SELECT 1 FROM outbox.events GROUP BY aggregatetype, aggregateid
		  HAVING count(*) = $per_key AND count(DISTINCT payload->>'n') = $per_key
		     AND min((payload->>'n')::int) = 1 AND max((payload->>'n')::int) = $per_key) k}),
	$n_keys, "each of the $n_keys keys has n = 1..$per_key");
is( q1(q{
		SELECT count(*) FROM (
		  SELECT (payload->>'n')::int AS n,
		         lag((payload->>'n')::int) OVER (PARTITION BY aggregatetype, aggregateid ORDER BY seq) AS prev
		    FROM outbox.events) e
		 WHERE n <= prev}),
	'0', 'each key was enqueued in increasing n');

# --- The consumer.
my %events;
for my $row (split /\n/,
	q1(q{SELECT id, aggregatetype, aggregateid, type, payload->>'n', seq, attempts FROM outbox.events}))
{
	my ($id, $at, $key, $type, $n, $seq, $attempts) = split /\|/, $row;
	$events{$id} = { at => $at, key => $key, type => $type, n => $n, seq => $seq, attempts => $attempts };
}
my $c = check_deliveries(slurp_file($record_file), \%events, $per_key);
note("record file: $c->{records} records, $c->{duplicates} duplicates (at least once), "
	  . "$c->{torn} torn by the kill -9");
none_of($c->{malformed}, 'every line of the record file is a record');
none_of($c->{unknown}, 'every recorded id is a committed event');
none_of($c->{mismatched}, "each record names its event's key and type");
none_of($c->{inversions}, 'no key was delivered out of order (first deliveries: n rises strictly)');
none_of($c->{incomplete}, "every key's first deliveries are exactly n = 1..$per_key (nothing missing)");
none_of($c->{undelivered}, 'every committed event was delivered');
is(scalar(keys %{ $c->{first} }), $n_keys * $per_key, 'the delivered ids are exactly the 100,000 committed ones');

# --- The rejected key: its first event was rejected at least twice, then delivered before
# its second; nothing of another key was rejected; other keys' later events passed it.
my ($k7_1) = grep { $events{$_}{key} eq $rejected_key && $events{$_}{n} == 1 } keys %events;
my ($k7_2) = grep { $events{$_}{key} eq $rejected_key && $events{$_}{n} == 2 } keys %events;
cmp_ok($events{$k7_1}{attempts}, '>=', 2, "$rejected_key n=1 was rejected at least twice")
  and note("$rejected_key n=1: $events{$k7_1}{attempts} rejections");
ok( defined $c->{first}{$k7_1} && defined $c->{first}{$k7_2} && $c->{first}{$k7_1} < $c->{first}{$k7_2},
	"$rejected_key n=1 was delivered before $rejected_key n=2");
is(q1(qq{SELECT count(*) FROM outbox.events WHERE attempts > 0 AND aggregateid <> '$rejected_key'}),
	'0', 'no event of another key was rejected');
note("$rejected_key events rejected: "
	  . q1(qq{SELECT string_agg(format('n=%s: %s', payload->>'n', attempts), ', ' ORDER BY seq)
	            FROM outbox.events WHERE aggregateid = '$rejected_key' AND attempts > 0}));
my $k7_pos = $c->{first}{$k7_1} // -1;
my @passed = grep {
	     $events{$_}{key} ne $rejected_key
	  && $events{$_}{seq} > $events{$k7_1}{seq}
	  && $c->{first}{$_} < $k7_pos
} keys %{ $c->{first} };
ok(@passed > 0,
	"other keys' later events were delivered while $rejected_key n=1 waited for its retries");
# The same, among the keys of its shard (the same worker's, at any time): likely, not certain
# (it depends on which events that worker's batches held while it waited), so only shown.
my %shard_of = map { split /\|/ } split /\n/,
  q1(q{SELECT k, outbox.shard_of('order', k) FROM (SELECT DISTINCT aggregateid AS k FROM outbox.events) s});
my $mates = grep { $shard_of{ $events{$_}{key} } == $shard_of{$rejected_key} } @passed;
note(scalar(@passed) . " later events of other keys passed $rejected_key n=1, $mates of them in its shard "
	  . "($shard_of{$rejected_key})");

$node->stop;
done_testing();
