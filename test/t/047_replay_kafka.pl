# Replay (outbox.replay) with the Kafka sink, against librdkafka's mock cluster, read back by
# an independent consumer (kcat). Proves that a replay sends every published event of its
# window again, once, through the sink, with the header outbox-replay = the replay's id and
# otherwise the original's key, partition, id header, headers and payload; that each key's
# replayed copies arrive in enqueue order; that events enqueued after the call are not part
# of it (they arrive once, without the header); that a filtered replay (aggregateid, ids)
# sends only what it selects; that a window starting before what rotation dropped is refused
# (22023) with nothing recorded or sent; that cancel_replay() of a finished replay is
# false; that the replay worker leaves once done; and that the server is never restarted.
# Then kill -9 of the replay worker mid-replay: the replay resumes after the restart and every
# event of it arrives, each key's in order. Last, a replay beside live events takes its share
# (outbox.replay_share) and still sends everything.
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

my $mock = KafkaMock->start(3);
my $bootstrap = $mock->bootstrap;
ok($bootstrap, "mock cluster at $bootstrap");

my $topic = 'outbox.event.order';

# Everything in the topic, in each partition's order, as [partition, key, headers, payload].
sub consume {
	return [ map { [ split /\t/, $_, 4 ] } $mock->consume($topic, '%p\t%k\t%h\t%s\n') ];
}

*header = \&KafkaMock::header;

# The headers but outbox-replay, sorted: what a copy shares with its original.
sub own_headers {
	my ($headers) = @_;
	return join(',', sort grep { !/^outbox-replay=/ } split /,/, $headers);
}

# --- the server
my $node = relay_node('replay_kafka', qq{
outbox.send_timeout = '3s'
outbox.retry_backoff_min = '50ms'
outbox.retry_backoff_max = '500ms'
restart_after_crash = on
});
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
$node->safe_psql('postgres', 'CREATE EXTENSION outbox;');
my $description = $node->safe_psql('postgres',
	qq{SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "$bootstrap", "linger.ms": 5}')});
like($description, qr/kafka/, "configured: $description");

my @keys = map { "k$_" } 1 .. 5;
my %enqueued;    # id -> [key, n, tag]
my %per_key;

# $rounds transactions, each with $per_round events of every key, in key order within a
# round: the payload's n counts each key's events in enqueue (seq) order.
sub enqueue_orders {
	my ($rounds, $per_round, $tag) = @_;
	my @ids;
	for (1 .. $rounds) {
		my @values;
		for my $i (1 .. $per_round) {
			for my $key (@keys) {
				push @values, sprintf("(%d, '%s', %d)", scalar(@values), $key, ++$per_key{$key});
			}
		}
		my $rows = $node->safe_psql('postgres', qq{
			SELECT outbox.enqueue('order', k, 'OrderCreated', jsonb_build_object('n', n, 'tag', '$tag'),
			                      '{"tenant": "t1"}') || ' ' || k || ' ' || n
			  FROM (SELECT * FROM (VALUES @{[ join(', ', @values) ]}) v(o, k, n) ORDER BY o) s});
		for my $row (split /\n/, $rows) {
			my ($id, $key, $n) = split / /, $row;
			$enqueued{$id} = [ $key, $n, $tag ];
			push @ids, $id;
		}
	}
	return @ids;
}

sub replay_row {
	my ($id) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT state, events_total, events_sent, events_skipped, coalesce(last_error, '')
		  FROM outbox.replays WHERE id = $id});
}

sub wait_replay_done {
	my ($id, $what) = @_;
	ok(OutboxNode::poll_until($node, "SELECT state = 'done' FROM outbox.replays WHERE id = $id"), $what)
	  or diag(replay_row($id));
}

# The topic, by id: the plain copies' count, the replayed copies' replay ids, each row.
sub read_topic {
	my (%plain, %replayed, %original, @copies, %partition_of);
	my $rows = consume();
	for my $r (@$rows) {
		my ($partition, $key, $headers, $payload) = @$r;
		my $id = header($headers, 'id') // '';
		my $replay = header($headers, 'outbox-replay');
		$partition_of{$key}{$partition} = 1;
		if (defined $replay) {
			push @{ $replayed{$id} }, $replay;
			push @copies, $r;
		}
		else {
			$plain{$id}++;
			$original{$id} = $r;
		}
	}
	return { plain => \%plain, replayed => \%replayed, original => \%original, copies => \@copies,
		rows => scalar(@$rows), partition_of => \%partition_of };
}

# The ids replay $replay sent, sorted (with duplicates, if any).
sub ids_of_replay {
	my ($topic_now, $replay) = @_;
	my $replayed = $topic_now->{replayed};
	my @ids;
	for my $id (keys %$replayed) {
		push @ids, $id for grep { $_ eq $replay } @{ $replayed->{$id} };
	}
	return [ sort @ids ];
}

# For each key, the payload's n of replay $replay's copies, in the order the topic holds them.
sub replayed_n_per_key {
	my ($topic_now, $replay) = @_;
	my %n;
	for my $r (@{ $topic_now->{copies} }) {
		next unless (header($r->[2], 'outbox-replay') // '') eq $replay;
		my ($n) = $r->[3] =~ /"n": (\d+)/;
		push @{ $n{ $r->[1] } }, $n;
	}
	return \%n;
}

# 1. The history: 5 keys x 40 events, in 8 transactions, all published.
my @before = sort(enqueue_orders(8, 5, 'before'));
is(scalar(@before), 200, '200 events enqueued');
wait_published($node, 'true', 'history: all published');
is(scalar(@{ consume() }), 200, 'history: 200 messages in the topic');
ok($node->safe_psql('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'outbox replay'}) eq 't',
	'no replay worker before a replay is requested');

# 2. A replay of everything retained, and events enqueued right after the call: those are
#    not part of it.
my $replay = $node->safe_psql('postgres', q{SELECT outbox.replay('-infinity', now())});
like($replay, qr/^\d+$/, "replay $replay requested");
my @live = sort(enqueue_orders(1, 2, 'live'));
is(scalar(@live), 10, '10 live events enqueued after the call');
is($node->safe_psql('postgres', qq{
	SELECT (since = (SELECT min(lower_bound) FROM outbox.partitions)) || ' ' || (until = requested_at)
	       || ' ' || (upto_seq < (SELECT min(seq) FROM outbox.events WHERE payload->>'tag' = 'live'))
	       || ' ' || (upto_seq >= (SELECT max(seq) FROM outbox.events WHERE payload->>'tag' = 'before'))
	  FROM outbox.replays WHERE id = $replay}),
	'true true true true', 'replay: -infinity is the oldest partition; upto_seq is the last seq at the call');
wait_replay_done($replay, 'replay: done');
is(replay_row($replay), 'done|200|200|0|', 'replay: 200 events in it, 200 sent, none skipped, no error');
wait_published($node, q{payload->>'tag' = 'live'}, 'live: all published');
is($node->safe_psql('postgres', qq{
	SELECT position = upto_seq AND started_at IS NOT NULL AND finished_at >= started_at
	  FROM outbox.replays WHERE id = $replay}), 't', 'replay: position, started_at and finished_at');
ok(OutboxNode::poll_until($node, q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'outbox replay'}),
	'replay: the replay worker left once no replay runs');
like(slurp_file($node->logfile), qr/outbox replay $replay: done, 200 events sent, 0 skipped/,
	'replay: the log says it is done');

# 3/4. The topic: each event once without the header; each event of the history once more
#      with the header = the replay's id, nothing else with it; the live events once.
my $t = read_topic();
is($t->{rows}, 410, 'topic: 200 + 10 originals and 200 copies');
is_deeply([ sort keys %{ $t->{plain} } ], [ sort(@before, @live) ],
	'topic: the ids without outbox-replay are all ids enqueued');
is_deeply([ sort grep { $t->{plain}{$_} != 1 } keys %{ $t->{plain} } ], [], 'topic: each arrived once without outbox-replay');
is_deeply([ sort keys %{ $t->{replayed} } ], \@before,
	'topic: the ids with outbox-replay are the ids enqueued before the call');
is_deeply(ids_of_replay($t, $replay), \@before, "topic: each of them once, with outbox-replay = $replay");
is_deeply([ grep { defined $t->{replayed}{$_} } @live ], [], 'topic: no live event was replayed');
is(scalar(grep { keys %{ $t->{partition_of}{$_} } != 1 } keys %{ $t->{partition_of} }), 0,
	'topic: each key in exactly one partition, copies included');
my @unlike = map { $_->[1] . ' ' . header($_->[2], 'id') } grep {
	my $o = $t->{original}{ header($_->[2], 'id') };
	!$o || $o->[0] ne $_->[0] || $o->[1] ne $_->[1] || $o->[3] ne $_->[3] || own_headers($o->[2]) ne own_headers($_->[2])
} @{ $t->{copies} };
is_deeply(\@unlike, [], 'topic: each copy has its original partition, key, payload and headers (id, type, tenant)');
is_deeply(replayed_n_per_key($t, $replay), { map { ($_ => [ 1 .. 40 ]) } @keys },
	"topic: each key's copies arrived in enqueue order, all 40 of them");

# 5. Filtered replays: one key (its history and its live events: all published before this
#    call), and a list of ids.
my $by_key = $node->safe_psql('postgres', q{SELECT outbox.replay('-infinity', now(), aggregateid => 'k3')});
wait_replay_done($by_key, "replay $by_key of k3: done");
my @k3 = sort grep { $enqueued{$_}[0] eq 'k3' } keys %enqueued;
is(replay_row($by_key), 'done|42|42|0|', "replay $by_key of k3: 42 events, 42 sent");
$t = read_topic();
is_deeply(ids_of_replay($t, $by_key), \@k3, "replay $by_key of k3: exactly k3's ids, once each");
is_deeply(replayed_n_per_key($t, $by_key), { k3 => [ 1 .. 42 ] }, "replay $by_key of k3: in enqueue order");

my @chosen = sort(($before[0], $before[77], $live[3]));
my $array = join(',', @chosen);
my $by_ids = $node->safe_psql('postgres', qq{SELECT outbox.replay('-infinity', now(), ids => '{$array}')});
wait_replay_done($by_ids, "replay $by_ids of 3 ids: done");
is(replay_row($by_ids), 'done|3|3|0|', "replay $by_ids of 3 ids: 3 events, 3 sent");
$t = read_topic();
is_deeply(ids_of_replay($t, $by_ids), \@chosen, "replay $by_ids of 3 ids: exactly those ids");
is($t->{rows}, 410 + 42 + 3, 'topic: nothing else arrived');

# 6. A window that starts before what rotation dropped (outbox.retained_since, as rotate()
#    records a drop): refused, nothing recorded, nothing sent.
$node->safe_psql('postgres', q{INSERT INTO outbox.retained_since (since) VALUES (now() - interval '1 hour')
	ON CONFLICT (singleton) DO UPDATE SET since = EXCLUDED.since});
my $replays = $node->safe_psql('postgres', 'SELECT count(*) FROM outbox.replays');
my $rows_before = scalar(@{ consume() });
my ($rc, $out, $err) = $node->psql('postgres', qq{\\set VERBOSITY verbose
SELECT outbox.replay(now() - interval '1 day', now());});
isnt($rc, 0, 'beyond retention: the call fails');
like($err, qr/ERROR:\s+22023: outbox\.replay: the window starts before the events rotation kept/,
	'beyond retention: SQLSTATE 22023, and why');
is($node->safe_psql('postgres', 'SELECT count(*) FROM outbox.replays'), $replays, 'beyond retention: no replay recorded');
sleep 2;    # ten relay polls: time for a replay, were one started, to send something
is(scalar(@{ consume() }), $rows_before, 'beyond retention: no message arrived');
$node->safe_psql('postgres', 'DELETE FROM outbox.retained_since');

# 7. Cancelling a finished replay does nothing; an unknown one is an error.
is($node->safe_psql('postgres', "SELECT outbox.cancel_replay($replay)"), 'f', 'cancel_replay of a finished replay: false');
is($node->safe_psql('postgres', "SELECT state FROM outbox.replays WHERE id = $replay"), 'done', 'it stays done');
($rc, $out, $err) = $node->psql('postgres', 'SELECT outbox.cancel_replay(999999)');
like($err, qr/there is no replay 999999/, 'cancel_replay of an unknown replay: an error');

# 8. The server never restarted.
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started, 'the postmaster never restarted');
is($node->safe_psql('postgres', q{SELECT state, unpublished, dead_lettered FROM outbox.status}), 'idle|0|0',
	'status: idle, nothing waiting, no dead letter');

# 9. kill -9 of the replay worker in the middle of a replay, while live events flow: the
#    server restarts every backend (a death by signal), relay 1 finds the replay still
#    running and asks for the worker again, which goes on from its position. Every event of
#    the replay arrives with its header (at least once: the batch in flight may come twice),
#    each key's copies in order of first arrival; the live events arrive, without it.
$node->safe_psql('postgres', q{ALTER SYSTEM SET outbox.batch_size = 20; SELECT pg_reload_conf()});
$mock->command('rtt -1 200');
my $crashed = $node->safe_psql('postgres', q{SELECT outbox.replay('-infinity', now())});
my @expected = sort keys %enqueued;
ok(OutboxNode::poll_until($node, qq{SELECT position > 0 FROM outbox.replays WHERE id = $crashed}),
	"replay $crashed: under way");
my @during = sort(enqueue_orders(1, 1, 'during'));
my $pid = $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'outbox replay'});
like($pid, qr/^\d+$/, "replay $crashed: its worker runs (pid $pid)");
is($node->safe_psql('postgres', qq{SELECT state FROM outbox.replays WHERE id = $crashed}), 'running',
	"replay $crashed: still running when its worker is killed");
kill 'KILL', $pid;
$mock->command('rtt -1 0');
ok(OutboxNode::poll_until($node, qq{SELECT state = 'done' FROM outbox.replays WHERE id = $crashed}),
	"replay $crashed: done after the crash") or diag(replay_row($crashed));
isnt($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), undef, 'the server is up again');
wait_published($node, q{payload->>'tag' = 'during'}, 'live events during the replay: published');
$t = read_topic();
my %seen;
is_deeply([ grep { !$seen{$_}++ } @{ ids_of_replay($t, $crashed) } ], \@expected,
	"replay $crashed: every event of it arrived with its header, across the crash");
is_deeply([ grep { defined $t->{replayed}{$_} && grep { $_ eq $crashed } @{ $t->{replayed}{$_} } } @during ], [],
	'live events during the replay: not part of it');
is_deeply([ grep { ($t->{plain}{$_} // 0) < 1 } @during ], [], 'live events during the replay: each arrived');
my $order = replayed_n_per_key($t, $crashed);
my @disordered = grep {
	my %first;
	my @firsts = grep { !$first{$_}++ } @{ $order->{$_} };
	join(',', @firsts) ne join(',', sort { $a <=> $b } @firsts)
} keys %$order;
is_deeply(\@disordered, [], "replay $crashed: each key's copies in order of first arrival");

# 10. While live events flow, the replay worker waits after each batch for its share
#     (outbox.replay_share, 1 % here), and says so in pg_stat_activity; once they stop, it
#     goes on and sends the whole replay. The share counts the worker's CPU time, which a
#     batch of 20 barely uses: 4,000 more events make the replay long enough (some 200
#     batches, each followed by a wait of 1 ms and 99 times its CPU time) to be seen waiting.
$node->safe_psql('postgres', q{ALTER SYSTEM SET outbox.replay_share = 1; SELECT pg_reload_conf()});
enqueue_orders(20, 40, 'bulk');
wait_published($node, 'true', 'before the shared replay: everything published');
my @expected_share = sort keys %enqueued;
my $shared = $node->safe_psql('postgres', q{SELECT outbox.replay('-infinity', now())});
my $waited = 0;
for (1 .. 300) {
	enqueue_orders(1, 1, 'share');
	$waited = $node->safe_psql('postgres', q{
		SELECT count(*) FROM pg_stat_activity
		 WHERE backend_type = 'outbox replay' AND query = 'outbox replay: leaving live events their share'});
	last if $waited;
}
ok($waited, "replay $shared: waits for its share while live events flow");
is($node->safe_psql('postgres', qq{SELECT state FROM outbox.replays WHERE id = $shared}), 'running',
	"replay $shared: still running then");
wait_replay_done($shared, "replay $shared: done once the live events stopped");
$t = read_topic();
%seen = ();
is_deeply([ sort grep { !$seen{$_}++ } @{ ids_of_replay($t, $shared) } ], \@expected_share,
	"replay $shared: every event of it arrived with its header");
$node->safe_psql('postgres', q{ALTER SYSTEM RESET outbox.replay_share; SELECT pg_reload_conf()});

$node->stop;
$mock->stop;
done_testing();
