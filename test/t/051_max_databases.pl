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
use OutboxNode qw(:DEFAULT :databases);

my $node = databases_node('max_databases', q{
outbox.max_databases = 2
outbox.max_workers = 4
max_worker_processes = 16
});

sub q1 { my ($db, $sql) = @_; return $node->safe_psql($db, $sql); }

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
add_database($node, $_) for qw(e1 e2);
enqueue_in($node, $_, 20) for qw(e1 e2);
wait_relay_in($node, $_, "$_ has a relay beside five databases without the extension") for qw(e1 e2);
delivered_as_sets($node, $_) for qw(e1 e2);

# 2. A third database with the extension: no relay, and everything says why.
add_database($node, 'e3');
enqueue_in($node, 'e3', 20);
says_waiting('e3', 'e1');
ok( $node->wait_for_log(
		qr/WARNING:  outbox launcher: outbox.max_databases \(2\) databases already have relays; database "e3" gets none/),
	'the log names the database and the setting');
is(q1('e3', q{SELECT count(*) FROM outbox.event_status WHERE published_at IS NOT NULL}),
	'0', 'e3: nothing published meanwhile');

# 3. DROP DATABASE frees an entry: e3's relay starts, and its events go out.
q1('postgres', 'DROP DATABASE e1');
wait_relay_in($node, 'e3', 'DROP DATABASE e1: the waiting database gets its relay');
enqueue_in($node, $_, 20) for qw(e2 e3);
delivered_as_sets($node, $_) for qw(e2 e3);

# 4. DROP EXTENSION frees one too.
add_database($node, 'e4');
enqueue_in($node, 'e4', 20);
says_waiting('e4', 'e3');
q1('e2', 'DROP EXTENSION outbox');
wait_relay_in($node, 'e4', 'DROP EXTENSION in e2: the waiting database gets its relay');
enqueue_in($node, 'e4', 20);
delivered_as_sets($node, $_) for qw(e3 e4);
is(q1('e3', q{SELECT string_agg(DISTINCT database, ',' ORDER BY database) FROM outbox.cluster_status}),
	'e3,e4', 'outbox.cluster_status lists the two databases with the extension');

$node->stop;
done_testing();
