# outbox.rotate() scheduled with pg_cron in the extension's own database (cron.database_name =
# the database of outbox, as docs/operations.md offers), runs and succeeds. The form with
# cron.schedule_in_database from another database: 026_readme_snippets.pl.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('cron');
# A PostgreSQL built from source (scripts/build-pg.sh) has pg_cron only when the archive
# served its source.
my $sharedir = $node->config_data('--sharedir');
plan skip_all => "pg_cron is not installed in $sharedir"
  unless -f "$sharedir/extension/pg_cron.control";
$node->init;
# The test cluster listens on a Unix socket only, so pg_cron runs its jobs in background
# workers instead of connecting over TCP.
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
cron.use_background_workers = on
max_worker_processes = 16
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION outbox; CREATE EXTENSION pg_cron;');

# docs/operations.md's line, verbatim.
my $jobid = $node->safe_psql('postgres',
	q{SELECT cron.schedule('outbox-rotate', '*/10 * * * *', 'SELECT outbox.rotate()')});
like($jobid, qr/^\d+$/, 'the documented schedule is accepted');

# Give rotation something to do: take away the newest partition.
my $newest = $node->safe_psql('postgres',
	q{SELECT name FROM outbox.partitions ORDER BY lower_bound DESC LIMIT 1});
$node->safe_psql('postgres',
	qq{ALTER TABLE outbox.events DETACH PARTITION outbox."$newest"; DROP TABLE outbox."$newest";});

# Same job, every minute, so that the test sees a run (pg_cron 1.4 has no seconds).
$node->safe_psql('postgres',
	q{SELECT cron.schedule('outbox-rotate', '* * * * *', 'SELECT outbox.rotate()')});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM cron.job_run_details WHERE command = 'SELECT outbox.rotate()' AND status IN ('succeeded', 'failed')}),
	'pg_cron ran the job');
is( $node->safe_psql('postgres',
		q{SELECT status || ' ' || coalesce(return_message, '') FROM cron.job_run_details WHERE command = 'SELECT outbox.rotate()' ORDER BY runid LIMIT 1}),
	'succeeded SELECT 1',
	'the run succeeded');
# (outbox.partitions still lists a partition dropped by hand until rotate() runs: look at
# the table itself.)
is( $node->safe_psql('postgres',
		qq{SELECT count(*) FROM pg_inherits WHERE inhparent = 'outbox.events'::regclass AND inhrelid = to_regclass('outbox."$newest"')}),
	'1', 'the scheduled rotation made the missing partition again');

$node->stop;
done_testing();
