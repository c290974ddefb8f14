# The relay's life: started by the launcher once its database exists, back after
# pg_terminate_backend, and outbox.status says why when none runs.
#  - outbox.database naming a missing database gives one WARNING with a hint, no FATAL;
#    once the database and the extension exist, the relay starts, no restart.
#  - pg_terminate_backend on the relay: the launcher starts a new one, which delivers.
#  - pg_terminate_backend on the launcher: the postmaster starts it again; the relay it
#    started goes on, and no second relay appears.
#  - outbox.workers = 0: status says the relay is disabled.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $node = PostgreSQL::Test::Cluster->new('lifecycle');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'outbox'
outbox.database = 'shop'
outbox.poll_interval = '200ms'
});
$node->start;

# 1. The database does not exist.
my $missing = qr/WARNING:  outbox launcher: database "shop" \(outbox.database\) does not exist; no relay runs/;
ok($node->wait_for_log($missing), 'a missing database is logged');
# status, seen from another database with the extension: no relay here, and why.
$node->safe_psql('postgres', 'CREATE EXTENSION outbox');
is( $node->safe_psql('postgres', q{SELECT worker IS NULL, pid IS NULL, state, database, detail FROM outbox.status}),
	't|t|disabled|postgres|outbox.database restricts the relay to another database',
	'status says why no relay runs here');
my $log = slurp_file($node->logfile);
my @warnings = ($log =~ /$missing/g);
is(scalar(@warnings), 1, 'the missing database is logged once');
like($log, qr/HINT:  Create it, or empty outbox.database/, 'with a hint');
unlike($log, qr/FATAL/, 'no FATAL');

# Created: the relay starts within the launcher's interval, without a server restart.
$node->safe_psql('postgres', 'CREATE DATABASE shop');
$node->safe_psql('shop', q{CREATE EXTENSION outbox; SELECT outbox.configure_sink('null')});
ok( $node->poll_query_until('shop', q{SELECT state = 'idle' AND pid IS NOT NULL FROM outbox.status}),
	'the relay starts once the database exists');
ok($node->wait_for_log(qr/outbox launcher: database "shop" exists now; starting the relay/),
	'and the launcher says so');

sub relay_pid {
	return $node->safe_psql('shop',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'outbox relay'});
}
sub enqueue_and_wait {
	my ($tag) = @_;
	my $id = $node->safe_psql('shop', qq{SELECT outbox.enqueue('order', '$tag', 'T', '{}')});
	ok($node->poll_query_until('shop',
			qq{SELECT published_at IS NOT NULL FROM outbox.event_status WHERE id = '$id'}),
		"an event enqueued $tag is published");
}
enqueue_and_wait('before');

# 2. pg_terminate_backend on the relay: a new one comes.
my $first = relay_pid();
$node->safe_psql('shop', qq{SELECT pg_terminate_backend($first)});
ok( $node->poll_query_until('shop',
		qq{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'outbox relay' AND pid <> $first}),
	'the relay is back after pg_terminate_backend');
enqueue_and_wait('after-terminate');
is($node->safe_psql('shop', q{SELECT state FROM outbox.status}), 'idle', 'status shows it running');

# 3. pg_terminate_backend on the launcher: the postmaster restarts it, the relay goes on.
my $relay = relay_pid();
my $launcher = $node->safe_psql('shop',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'outbox launcher'});
$node->safe_psql('shop', qq{SELECT pg_terminate_backend($launcher)});
ok( $node->poll_query_until('shop',
		qq{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'outbox launcher' AND pid <> $launcher}),
	'the launcher is back');
is(relay_pid(), $relay, 'the relay it had started goes on, alone');
enqueue_and_wait('after-launcher');

# 4. outbox.workers = 0.
$node->append_conf('postgresql.conf', 'outbox.workers = 0');
$node->restart;
is( $node->safe_psql('shop', q{SELECT state, detail FROM outbox.status}),
	'disabled|outbox.workers is 0: no relay runs on this server',
	'status says the relay is disabled');
is($node->safe_psql('shop',
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type IN ('outbox relay', 'outbox launcher')}),
	'0', 'and nothing runs');

$node->stop;
done_testing();
