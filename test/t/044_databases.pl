# Relays in every database that has the extension, and nothing in the DBA's way
# (docs/operations.md, "Several databases"). Five databases, each with its own null sink
# and record_file (an independent consumer: a line per acknowledged message), no
# outbox.database. While writers run in two of them:
#  - DROP DATABASE, CREATE DATABASE ... TEMPLATE, ALTER DATABASE ... RENAME and SET
#    TABLESPACE succeed at the first try, without FORCE; ALLOW_CONNECTIONS false stops the
#    database's relays and true brings them back; the other databases' relays keep their
#    pids;
#  - the clone gets relays of its own; a database past outbox.max_workers gets none, and
#    its outbox.status says which setting to raise; it gets one when a slot frees;
#  - a broken sink in one database does not hold up another's events;
#  - kill -9 of one database's relay: every relay starts again;
#  - DROP EXTENSION stops that database's relay only.
# Every event of every remaining database reaches its own database's record_file (the ids,
# as sets), and no other's.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::Bin;
use OutboxNode qw(:DEFAULT :databases);

my $node = databases_node('databases', q{
outbox.max_workers = 5
max_worker_processes = 16
restart_after_crash = on
});

sub q1 { my ($db, $sql) = @_; return $node->safe_psql($db, $sql); }

# The relay pid of each database: datname => pid.
sub relays {
	my %pids = map { split /\|/ } split /\n/, q1('postgres', q{
		SELECT datname, pid FROM pg_stat_activity WHERE backend_type = 'outbox relay'});
	return \%pids;
}

sub wait_published_in {
	my ($db) = @_;
	ok($node->poll_query_until($db, q{
			SELECT count(*) = 0 FROM outbox.event_status WHERE published_at IS NULL}),
		"$db: published before it is cloned");
}

# 1. Five databases get a relay each, with no setting and no restart.
add_database($node, "d$_") for 1 .. 5;
wait_relay_in($node, "d$_", "d$_: CREATE EXTENSION starts a relay") for 1 .. 5;
is(q1('d1', q{SELECT count(*) FROM outbox.status}), '1', 'outbox.status shows its own database only');
is(q1('d1', q{SELECT database FROM outbox.status}), 'd1', '... named');
is(q1('d1', q{SELECT count(DISTINCT database) FROM outbox.cluster_status WHERE pid IS NOT NULL}),
	'5', 'outbox.cluster_status shows all five');
q1('postgres', 'CREATE ROLE watcher LOGIN IN ROLE pg_monitor');
is($node->safe_psql('d3', 'SELECT count(*) FROM outbox.cluster_status', extra_params => [ '-U', 'watcher' ]),
	'5', 'pg_monitor reads outbox.cluster_status');
enqueue_in($node, "d$_", 50) for 1 .. 5;

# 2. Writers in d4 and d5 while the DBA works on d1, d2 and d3.
my $pgbench = $node->installed_command('pgbench');
my $script = $node->basedir . '/enqueue.sql';
open my $fh, '>', $script or die;
print $fh q{SELECT outbox.enqueue('w', 'k' || (random() * 9)::int, 'W', '{}');} . "\n";
close $fh;
my @writers = map {
	IPC::Run::start([ $pgbench, '-n', '-c', '2', '-T', '10', '-R', '200', '-f', $script,
			'-h', $node->host, '-p', $node->port, $_ ], '>', \my $out, '2>', \my $err)
} qw(d4 d5);
my $undisturbed = relays();

# A role that does not own the database cannot stop its relays by trying.
my ($rc, $stdout, $stderr) = $node->psql('postgres', 'DROP DATABASE d4', extra_params => [ '-U', 'watcher' ]);
like($stderr, qr/must be owner of database d4/, 'DROP DATABASE by a role that does not own it fails');

my %d1_ids = map { $_ => 1 } @{ db_ids($node, 'd1') };
($rc, $stdout, $stderr) = $node->psql('postgres', 'DROP DATABASE d1');
is($rc, 0, 'DROP DATABASE succeeds at the first try while its relay runs') or diag($stderr);

wait_published_in('d2');
($rc, $stdout, $stderr) = $node->psql('postgres', 'CREATE DATABASE d6 TEMPLATE d2');
is($rc, 0, 'CREATE DATABASE ... TEMPLATE succeeds at the first try') or diag($stderr);
# The clone is a database of its own, with d2's sink configuration: give it its own.
add_database($node, 'd6', exists => 1);
wait_relay_in($node, 'd6', 'the clone gets a relay of its own');
wait_relay_in($node, 'd2', 'and the template gets its relay back');

($rc, $stdout, $stderr) = $node->psql('postgres', 'ALTER DATABASE d3 RENAME TO d3r');
is($rc, 0, 'ALTER DATABASE ... RENAME succeeds at the first try') or diag($stderr);
wait_relay_in($node, 'd3r', 'the renamed database gets its relay back');

mkdir $node->basedir . '/ts' or die;
q1('postgres', "CREATE TABLESPACE ts LOCATION '" . $node->basedir . "/ts'");
($rc, $stdout, $stderr) = $node->psql('postgres', 'ALTER DATABASE d3r SET TABLESPACE ts');
is($rc, 0, 'ALTER DATABASE ... SET TABLESPACE succeeds at the first try') or diag($stderr);
wait_relay_in($node, 'd3r', 'and the relay comes back after it');

q1('postgres', 'ALTER DATABASE d3r ALLOW_CONNECTIONS false');
ok( $node->poll_query_until('postgres', q{
		SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'outbox relay' AND datname = 'd3r'}),
	'ALLOW_CONNECTIONS false: the relay leaves');
q1('postgres', 'ALTER DATABASE d3r ALLOW_CONNECTIONS true');
wait_relay_in($node, 'd3r', 'ALLOW_CONNECTIONS true: it comes back');

$_->finish for @writers;
my $now = relays();
is_deeply([ @$now{qw(d4 d5)} ], [ @$undisturbed{qw(d4 d5)} ], "the writers' databases kept their relays");

# 3. A broken sink in one database does not slow another: d5's sink finds every message
# unavailable and backs off; d4's events flow meanwhile.
q1('d5', q{SELECT outbox.configure_sink('null', '{"record_file": "d5.tsv", "unavailable_every": 1}')});
enqueue_in($node, 'd5', 10);
ok($node->poll_query_until('d5', q{SELECT state = 'backoff' FROM outbox.status}), 'a broken sink backs d5 off');
enqueue_in($node, 'd4', 10);
ok($node->poll_query_until('d4', q{SELECT count(*) = 0 FROM outbox.event_status WHERE published_at IS NULL}),
	"d4's events flow meanwhile");
is(q1('d5', q{SELECT state FROM outbox.status}), 'backoff', 'while d5 still backs off');
q1('d5', q{SELECT outbox.configure_sink('null', '{"record_file": "d5.tsv"}')});

# 4. The cap: five relays run (d2..d6); a sixth database gets none, and says why.
add_database($node, 'd7');
enqueue_in($node, 'd7', 20);
ok( $node->poll_query_until('d7', q{
		SELECT state = 'not started' AND detail LIKE 'outbox.max_workers (5) relays run in other databases%'
		  FROM outbox.status}),
	'past outbox.max_workers, outbox.status says which setting to raise');
($rc, $stdout, $stderr) = $node->psql('postgres', 'DROP DATABASE d6');
is($rc, 0, 'DROP DATABASE of the clone');
wait_relay_in($node, 'd7', 'the freed slot goes to the database that had none');

# 5. kill -9 of one database's relay: PostgreSQL restarts every process, and every database
# gets its relay back.
enqueue_in($node, $_, 30) for qw(d2 d3r d4 d5 d7);
kill 'KILL', relays()->{d4};
wait_relay_in($node, $_, "after kill -9: $_ has a relay again") for qw(d2 d3r d4 d5 d7);
enqueue_in($node, $_, 30) for qw(d2 d3r d4 d5 d7);

delivered_as_sets($node, $_, $_) for qw(d2 d4 d5 d7);
delivered_as_sets($node, 'd3r', 'd3');
is_deeply([ grep { !$d1_ids{$_} } @{ recorded_ids($node, 'd1') } ], [], "the dropped database's file holds only its events");

# 6. DROP EXTENSION: the database's relay leaves, and the others stay.
$undisturbed = relays();
q1('d5', 'DROP EXTENSION outbox');
ok( $node->poll_query_until('postgres', q{
		SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'outbox relay' AND datname = 'd5'}),
	'DROP EXTENSION: the relay leaves');
is(q1('d2', q{SELECT count(*) FROM outbox.cluster_status WHERE database = 'd5'}), '0',
	'and outbox.cluster_status no longer lists the database');
is_deeply([ @{ relays() }{qw(d2 d3r d4 d7)} ], [ @$undisturbed{qw(d2 d3r d4 d7)} ],
	"the other databases' relays go on");

$node->stop;
done_testing();
