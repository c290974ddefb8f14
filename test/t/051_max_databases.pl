# outbox.max_databases (docs/operations.md, "Several databases"): the launcher's entries go
# to databases that have the extension, not to every database that takes connections.
# outbox.max_databases = 2:
#  - five databases without the extension (more than 2) take none: two databases with it
#    get their relays;
#  - a third database with the extension gets none, and its outbox.status, cluster_status
#    and the log say why (not "has not found this database yet");
#  - DROP DATABASE of one of the two frees its entry: the waiting database's relay starts
#    without a restart; DROP EXTENSION frees one the same way.
# Every event of each database reaches its own record_file (the ids, as sets).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $node = PostgreSQL::Test::Cluster->new('max_databases');
$node->init;
my $files = $node->basedir . '/sink_files';
mkdir $files, 0750 or die "mkdir $files: $!";
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'outbox'
outbox.poll_interval = '200ms'
outbox.max_databases = 2
outbox.max_workers = 4
max_worker_processes = 16
outbox.sink_files_directory = '$files'
});
$node->start;

sub q1 { my ($db, $sql) = @_; return $node->safe_psql($db, $sql); }

sub add_database {
	my ($db) = @_;
	q1('postgres', "CREATE DATABASE $db");
	q1($db, 'CREATE EXTENSION outbox');
	my $path = "$files/$db.tsv";
	open my $fh, '>', $path or die "$path: $!";
	close $fh;
	chmod 0644, $path;    # the null sink refuses a private file
	q1($db, qq{SELECT outbox.configure_sink('null', '{"record_file": "$db.tsv"}')});
}

sub enqueue {
	my ($db, $n) = @_;
	q1($db, qq{SELECT outbox.enqueue('t', 'k' || (i % 7), 'T', jsonb_build_object('i', i))
	             FROM generate_series(1, $n) i});
}

sub wait_relay_in {
	my ($db, $what) = @_;
	ok( $node->poll_query_until('postgres', qq{
			SELECT count(*) = 1 FROM pg_stat_activity
			 WHERE backend_type = 'outbox relay' AND datname = '$db'
			   AND query = 'outbox relay: waiting for events'}),
		$what);
}

sub recorded {
	my ($db) = @_;
	my %ids;
	for my $line (split /\n/, slurp_file("$files/$db.tsv")) {
		my (undef, undef, $id) = split /\t/, $line;
		$ids{$id} = 1 if defined $id && $id =~ /^[0-9a-f-]{36}$/;
	}
	return [ sort keys %ids ];
}

sub delivered_as_sets {
	my ($db) = @_;
	ok($node->poll_query_until($db, q{
			SELECT count(*) = 0 FROM outbox.event_status WHERE published_at IS NULL}),
		"$db: everything published");
	is_deeply(recorded($db), [ sort split /\n/, q1($db, 'SELECT id FROM outbox.events') ],
		"$db: its record file holds exactly its events");
}

my $waiting = q{waiting: outbox.max_databases (2) databases already have relays%};

sub says_waiting {
	my ($db, $watcher) = @_;
	ok( $node->poll_query_until($db, qq{
			SELECT bool_and(state = 'not started' AND pid IS NULL AND detail LIKE '$waiting')
			  FROM outbox.status}),
		"$db: outbox.status says it waits for outbox.max_databases");
	ok( $node->poll_query_until($watcher, qq{
			SELECT count(*) = 1 FROM outbox.cluster_status
			 WHERE database = '$db' AND pid IS NULL AND detail LIKE '$waiting'}),
		"$db: outbox.cluster_status shows it, with the reason");
}

# 1. Databases without the extension (postgres, n1..n4: five) take no entry for good.
q1('postgres', "CREATE DATABASE n$_") for 1 .. 4;
add_database($_) for qw(e1 e2);
enqueue($_, 20) for qw(e1 e2);
wait_relay_in($_, "$_ has a relay beside five databases without the extension") for qw(e1 e2);
delivered_as_sets($_) for qw(e1 e2);

# 2. A third database with the extension: no relay, and everything says why.
add_database('e3');
enqueue('e3', 20);
says_waiting('e3', 'e1');
ok( $node->wait_for_log(
		qr/WARNING:  outbox launcher: outbox.max_databases \(2\) databases already have relays; database "e3" gets none/),
	'the log names the database and the setting');
is(q1('e3', q{SELECT count(*) FROM outbox.event_status WHERE published_at IS NOT NULL}),
	'0', 'e3: nothing published meanwhile');

# 3. DROP DATABASE frees an entry: e3's relay starts, and its events go out.
q1('postgres', 'DROP DATABASE e1');
wait_relay_in('e3', 'DROP DATABASE e1: the waiting database gets its relay');
enqueue($_, 20) for qw(e2 e3);
delivered_as_sets($_) for qw(e2 e3);

# 4. DROP EXTENSION frees one too.
add_database('e4');
enqueue('e4', 20);
says_waiting('e4', 'e3');
q1('e2', 'DROP EXTENSION outbox');
wait_relay_in('e4', 'DROP EXTENSION in e2: the waiting database gets its relay');
enqueue('e4', 20);
delivered_as_sets($_) for qw(e3 e4);
is(q1('e3', q{SELECT string_agg(DISTINCT database, ',' ORDER BY database) FROM outbox.cluster_status}),
	'e3,e4', 'outbox.cluster_status lists the two databases with the extension');

$node->stop;
done_testing();
