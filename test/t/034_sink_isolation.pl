# A sink library that crashes or hangs does not restart the database (outbox.sink_isolation
# = process): the sink runs in outbox_sink_host, a child of the relay that is no PostgreSQL
# process. The test sink outbox_sink_crashtest.so (test/unit/crashtest_plugin.cpp, installed
# by test/run-tests.sh) acknowledges everything unless told to crash (SIGSEGV, abort()) or to
# hang. Each time:
#  - the postmaster is not restarted (pg_postmaster_start_time() unchanged, no "terminated
#    by signal" in its log) and another backend's open transaction is still alive;
#  - outbox.status says what happened to the sink process, and no attempt is used;
#  - the dead sink processes are reaped (no zombie is left behind);
# and once the option is removed, every event is published (the ids, as a set).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $node = OutboxNode::relay_node('sink_isolation', q{
outbox.sink_isolation = 'process'
outbox.retry_backoff_min = '100ms'
outbox.retry_backoff_max = '1s'
outbox.send_timeout = '1s'
});
sub q1 { return $node->safe_psql('postgres', $_[0]); }
q1('CREATE EXTENSION outbox');
is(q1('SHOW outbox.sink_isolation'), 'process', 'the sink runs in a process of its own');

q1(q{SELECT outbox.configure_sink('crashtest', '{}')});
my @ids = split /\n/, q1(q{SELECT outbox.enqueue('t', 'k' || i, 'T', '{}') FROM generate_series(1, 5) i});
OutboxNode::wait_published($node, 'true', 'a healthy sink in its process delivers');
my $started = q1('SELECT pg_postmaster_start_time()');
my $other = $node->background_psql('postgres');
$other->query_safe('BEGIN; CREATE TEMP TABLE alive (i int); INSERT INTO alive VALUES (1)');

# No process of the relay's children is a zombie.
sub zombies {
	my $pid = q1(q{SELECT pid FROM outbox.status});
	return 0 if $pid eq '';
	my @stats = grep { /\S/ } split /\n/, `ps -o stat= --ppid $pid`;
	return scalar grep { /^Z/ } @stats;
}

my $log_offset = -s $node->logfile;
for my $case (
	[ '{"crash_in": "finish"}', '%sink process died (signal 11)%', 'SIGSEGV while waiting for acknowledgements' ],
	[ '{"crash_in": "start", "crash_signal": "6"}', '%sink process died (signal 6)%', 'abort() while sending' ],
	[ '{"hang_in": "finish"}', '%sink process did not answer; killed%', 'a hang' ])
{
	my ($options, $error, $what) = @$case;
	q1(qq{SELECT outbox.configure_sink('crashtest', '$options')});
	push @ids, split /\n/, q1(q{SELECT outbox.enqueue('t', 'k' || i, 'T', '{}') FROM generate_series(1, 5) i});
	my $found = $node->poll_query_until('postgres', qq{
		SELECT bool_or(last_error LIKE '$error') FROM outbox.status});
	ok($found, "$what: outbox.status says so")
	  or diag(q1('SELECT state, last_error FROM outbox.status'));
	is(q1('SELECT pg_postmaster_start_time()'), $started, "$what: the postmaster did not restart");
	is($other->query_safe('SELECT count(*) FROM alive'), '1', "$what: another backend's transaction lives");
	is(q1('SELECT count(*) FROM outbox.events WHERE attempts > 0 OR dead_at IS NOT NULL'), '0',
		"$what: no attempt used");
	# The sink crashes again at each retry: at most the one that just died is not reaped yet.
	cmp_ok(zombies(), '<=', 1, "$what: the dead sink processes are reaped");
}
ok(!$node->log_contains(qr/terminated by signal|server process .* was terminated/, $log_offset),
	'the postmaster never saw a process die by signal');

q1(q{SELECT outbox.configure_sink('crashtest', '{}')});
OutboxNode::wait_published($node, 'true', 'without the option, delivery resumes');
is_deeply(OutboxNode::ids($node, 'SELECT id FROM outbox.event_status WHERE published_at IS NOT NULL'),
	[ sort @ids ], 'every event is published, none lost');
is(zombies(), 0, 'no zombie is left behind');
$other->query_safe('COMMIT');
$other->quit;

$node->stop;
done_testing();
