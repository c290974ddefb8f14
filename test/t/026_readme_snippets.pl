# The documentation's snippets, run as pasted: the README's Quick start (its postgresql.conf
# lines and its SQL, in a fresh database "shop") publishes the event it enqueues, and the
# pg_cron setup of docs/operations.md, run in database postgres, rotates "shop"; its jobs for
# several databases rotate "shop" and "billing". The blocks are the fenced blocks that follow
# a "<!-- test: NAME -->" line.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my @conf = marked_blocks('README.md', 'quickstart-conf');
my @quickstart = marked_blocks('README.md', 'quickstart');
is(scalar @conf, 1, 'the README has one marked Quick start configuration block');
ok(@quickstart >= 1, 'the README has marked Quick start SQL blocks');

my $node = PostgreSQL::Test::Cluster->new('readme');
my $sharedir = $node->config_data('--sharedir');
# A PostgreSQL built from source (scripts/build-pg.sh) has pg_cron only when the archive
# served its source.
my $have_cron = -f "$sharedir/extension/pg_cron.control";
my @cron_conf = marked_blocks('docs/operations.md', 'pg_cron-conf');
my @cron_sql = marked_blocks('docs/operations.md', 'pg_cron');
is(scalar @cron_conf, 1, 'docs/operations.md has one marked pg_cron configuration block');
is(scalar @cron_sql, 1, 'docs/operations.md has one marked pg_cron SQL block');

$node->init;
$node->append_conf('postgresql.conf', $conf[0]);
if ($have_cron) {
	# The test cluster listens on a Unix socket only, so pg_cron runs its jobs in background
	# workers instead of connecting to localhost; they need worker slots.
	$node->append_conf('postgresql.conf', $cron_conf[0] . qq{
cron.use_background_workers = on
max_worker_processes = 16
});
}
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE shop');

# The Quick start as pasted; its output holds the id that enqueue returned.
my ($rc, $out, $err) = $node->psql('shop', join("\n", @quickstart), on_error_stop => 1);
is($rc, 0, 'the Quick start runs without error') or diag($err);
my @ids = sort($out =~ /\b([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b/g);
ok(@ids >= 1, 'the Quick start printed the id of its event');
ok( $node->poll_query_until('shop',
		q{SELECT count(*) = 0 FROM outbox.event_status WHERE published_at IS NULL}),
	'the relay published what the Quick start enqueued');
is_deeply(
	[ sort split /\n/, $node->safe_psql('shop',
		q{SELECT id FROM outbox.event_status WHERE published_at IS NOT NULL}) ],
	\@ids,
	'the published events are exactly the ones the Quick start enqueued');
is($node->safe_psql('shop', q{SELECT customer || ' ' || total FROM orders}),
	'alice 42.00', 'the order committed with its event');

# The grants, as pasted: the role enqueues and reads no event.
my @grants = marked_blocks('README.md', 'grants');
is(scalar @grants, 1, 'the README has one marked grants block');
($rc, $out, $err) = $node->psql('shop', $grants[0], on_error_stop => 1);
is($rc, 0, 'the grants run without error') or diag($err);
$node->safe_psql('shop', q{GRANT INSERT ON orders TO app});
($rc, $out, $err) = $node->psql('shop', q{SET ROLE app; BEGIN;
INSERT INTO orders VALUES (2, 'bob', 7);
SELECT outbox.enqueue('order', '2', 'OrderCreated', '{"order_id": 2}');
COMMIT;}, on_error_stop => 1);
is($rc, 0, 'the application role enqueues in its own transaction') or diag($err);
($rc, $out, $err) = $node->psql('shop', q{SET ROLE app; SELECT count(*) FROM outbox.events});
like($err, qr/permission denied/, 'and cannot read the events');

# docs/security.md's grants for every role, as pasted: each role can do what the table says.
my @roles = marked_blocks('docs/security.md', 'security-grants');
is(scalar @roles, 1, 'docs/security.md has one marked block of grants');
$node->safe_psql('shop', 'CREATE ROLE consumer LOGIN; CREATE ROLE ops LOGIN; CREATE ROLE watcher LOGIN');
($rc, $out, $err) = $node->psql('shop', $roles[0], on_error_stop => 1);
is($rc, 0, "docs/security.md's grants run without error") or diag($err);
is($node->safe_psql('shop', q{SET ROLE consumer;
SELECT outbox.inbox_receive('billing', '00000000-0000-4000-8000-000000000001', now())}), 't',
	'the consumer records an event in its inbox');
is($node->safe_psql('shop', q{SET ROLE ops;
SELECT outbox.requeue_dead(dry_run => true) >= 0 AND outbox.discard_dead(dry_run => true) >= 0,
       (SELECT count(*) FROM outbox.dead_letter_actions) >= 0,
       (SELECT count(*) FROM outbox.event_status) >= 0}), 't|t|t',
	'the operator counts and handles dead letters and reads their log and every event');
($rc, $out, $err) = $node->psql('shop', q{SET ROLE consumer; SELECT count(*) FROM outbox.inbox});
like($err, qr/permission denied/, "the consumer cannot read the inbox's records");

SKIP: {
	skip "pg_cron is not installed in $sharedir", 11 unless $have_cron;

	# The README's schedule line is the one docs/operations.md sets up.
	my ($readme_line) = marked_blocks('README.md', 'pg_cron-readme');
	ok(defined $readme_line && index($cron_sql[0], $readme_line =~ s/\n+\z//r) >= 0,
		"the README's pg_cron line is in docs/operations.md's setup");

	# Give rotation something to do: take away the newest partition of "shop" and of a second
	# database, "billing".
	$node->safe_psql('postgres', 'CREATE DATABASE billing');
	$node->safe_psql('billing', 'CREATE EXTENSION outbox');
	my %newest;
	for my $db (qw(shop billing)) {
		$newest{$db} = $node->safe_psql($db,
			q{SELECT name FROM outbox.partitions ORDER BY lower_bound DESC LIMIT 1});
		$node->safe_psql($db,
			qq{ALTER TABLE outbox.events DETACH PARTITION outbox."$newest{$db}"; DROP TABLE outbox."$newest{$db}";});
	}
	my $newest = $newest{shop};

	($rc, $out, $err) = $node->psql('postgres', $cron_sql[0], on_error_stop => 1);
	is($rc, 0, "docs/operations.md's pg_cron setup runs without error") or diag($err);
	is( $node->safe_psql('postgres',
			q{SELECT jobname || ' ' || database || ' ' || schedule FROM cron.job ORDER BY jobname}),
		"cron-history-cleanup postgres 30 3 * * *\noutbox-rotate shop */10 * * * *",
		'the rotation is scheduled in database shop, the cleanup in postgres');

	# The jobs for several databases, as pasted.
	my ($databases_sql) = marked_blocks('docs/operations.md', 'pg_cron-databases');
	($rc, $out, $err) = $node->psql('postgres', $databases_sql, on_error_stop => 1);
	is($rc, 0, "docs/operations.md's jobs for several databases run without error") or diag($err);
	is( $node->safe_psql('postgres',
			q{SELECT string_agg(jobname || ' ' || database, ', ' ORDER BY jobname) FROM cron.job WHERE jobname LIKE 'outbox-rotate-%'}),
		'outbox-rotate-billing billing, outbox-rotate-shop shop',
		'a rotation job for each database');

	# Run them soon: in seconds where pg_cron has them (1.5 and later), else every minute
	# (1.4, Debian 12's).
	my $jobid = $node->safe_psql('postgres',
		q{SELECT jobid FROM cron.job WHERE jobname = 'outbox-rotate'});
	for my $job (split /\n/, $node->safe_psql('postgres',
			q{SELECT jobid FROM cron.job WHERE jobname LIKE 'outbox-rotate%'})) {
		my ($seconds_rc) = $node->psql('postgres',
			qq{SELECT cron.alter_job($job, schedule => '2 seconds')});
		$node->safe_psql('postgres', qq{SELECT cron.alter_job($job, schedule => '* * * * *')})
		  if $seconds_rc != 0;
	}
	ok( $node->poll_query_until('postgres',
			qq{SELECT count(*) > 0 FROM cron.job_run_details WHERE jobid = $jobid AND status IN ('succeeded', 'failed')}),
		'pg_cron ran the rotation');
	ok( $node->poll_query_until('postgres', q{
			SELECT count(DISTINCT j.jobname) = 2 FROM cron.job_run_details r JOIN cron.job j USING (jobid)
			 WHERE j.jobname LIKE 'outbox-rotate-%' AND r.status = 'succeeded'}),
		'and the rotation of each database succeeded');
	is( $node->safe_psql('billing',
			qq{SELECT count(*) FROM pg_inherits WHERE inhparent = 'outbox.events'::regclass AND inhrelid = to_regclass('outbox."$newest{billing}"')}),
		'1', 'the scheduled rotation made the missing partition again in billing');
	is( $node->safe_psql('postgres',
			qq{SELECT status FROM cron.job_run_details WHERE jobid = $jobid AND status IN ('succeeded', 'failed') ORDER BY runid LIMIT 1}),
		'succeeded',
		'the rotation succeeded');
	# (outbox.partitions still lists a partition dropped by hand until rotate() runs: look
	# at the table itself.)
	is( $node->safe_psql('shop',
			qq{SELECT count(*) FROM pg_inherits WHERE inhparent = 'outbox.events'::regclass AND inhrelid = to_regclass('outbox."$newest"')}),
		'1', 'the scheduled rotation made the missing partition again in shop');

	# The cleanup job's command is valid SQL and keeps recent history.
	my $cleanup = $node->safe_psql('postgres',
		q{SELECT command FROM cron.job WHERE jobname = 'cron-history-cleanup'});
	$node->safe_psql('postgres', $cleanup);
	is( $node->safe_psql('postgres',
			qq{SELECT count(*) > 0 FROM cron.job_run_details WHERE jobid = $jobid}),
		't', 'the history cleanup runs and keeps the recent runs');
}

$node->stop;
done_testing();
