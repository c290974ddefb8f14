# The documentation's snippets, run as pasted: the README's Quick start (its postgresql.conf
# lines and its SQL, in a fresh database "shop") publishes the event it enqueues; its webhook
# snippet (the files directory, the whsec_ secret file, configure_sink) configures the http
# sink, whose requests a local receiver verifies with that secret; the pg_monitor list of
# docs/operations.md is what pg_monitor may read, no more, no less; reference.md's contents
# link every function, view and table it documents; and the pg_cron setup of
# docs/operations.md, run in database postgres, rotates "shop"; its jobs for several
# databases rotate "shop" and "billing". The blocks are the fenced blocks that follow a
# "<!-- test: NAME -->" line.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);
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
# The name bound to consumer is refused to another role granted inbox_receive, which
# neither learns nor records anything.
$node->safe_psql('shop', q{CREATE ROLE other_consumer;
GRANT USAGE ON SCHEMA outbox TO other_consumer;
GRANT EXECUTE ON FUNCTION outbox.inbox_receive(text, uuid, timestamptz) TO other_consumer});
($rc, $out, $err) = $node->psql('shop', q{SET ROLE other_consumer;
SELECT outbox.inbox_receive('billing', '00000000-0000-4000-8000-000000000002', now())});
like($err, qr/may not record for consumer "billing"/, "another role cannot use the consumer's bound name");
is($node->safe_psql('shop', q{SELECT count(*) FROM outbox.inbox WHERE event_id = '00000000-0000-4000-8000-000000000002'}),
	'0', '... and nothing is recorded');
$node->safe_psql('shop', q{REVOKE ALL ON FUNCTION outbox.inbox_receive(text, uuid, timestamptz) FROM other_consumer;
REVOKE ALL ON SCHEMA outbox FROM other_consumer; DROP ROLE other_consumer});

# docs/operations.md's list of what pg_monitor reads: exactly these, of everything in schema
# outbox but the internal functions (named _...) the views call.
my @monitor_list = marked_blocks('docs/operations.md', 'pg_monitor-reads');
is(scalar @monitor_list, 1, 'docs/operations.md has one marked list of what pg_monitor reads');
my @listed = grep { /\S/ } split /[\s,]+/, $monitor_list[0] // '';
ok(@listed >= 2, 'the list names objects') or diag($monitor_list[0]);
my %listed = map { $_ => 1 } @listed;
for my $object (@listed) {
	my $check = $object =~ /\(\)$/
	  ? qq{SELECT has_function_privilege('pg_monitor', '$object', 'EXECUTE')}
	  : qq{SELECT has_table_privilege('pg_monitor', '$object', 'SELECT')};
	is($node->safe_psql('shop', $check), 't', "pg_monitor may read $object");
}
# Every relation and every non-internal function of schema outbox that pg_monitor may use.
my @readable = split /\n/, $node->safe_psql('shop', q{
	SELECT 'outbox.' || c.relname FROM pg_class c
	 WHERE c.relnamespace = 'outbox'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
	   AND has_table_privilege('pg_monitor', c.oid, 'SELECT')
	UNION ALL
	SELECT 'outbox.' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')'
	  FROM pg_proc p
	 WHERE p.pronamespace = 'outbox'::regnamespace AND p.proname NOT LIKE '\_%'
	   AND has_function_privilege('pg_monitor', p.oid, 'EXECUTE')
	ORDER BY 1});
is_deeply(\@readable, [ sort @listed ],
	"what pg_monitor may read in schema outbox is exactly docs/operations.md's list");
# And a member of pg_monitor reads each one.
$node->safe_psql('shop', 'CREATE ROLE monitor_member LOGIN IN ROLE pg_monitor');
for my $object (@listed) {
	my $query = $object =~ /\(\)$/ ? "SELECT $object IS NOT NULL" : "SELECT count(*) >= 0 FROM $object";
	($rc, $out, $err) = $node->psql('shop', "SET ROLE monitor_member; $query");
	is($rc, 0, "a member of pg_monitor reads $object") or diag($err);
}
$node->safe_psql('shop', 'DROP ROLE monitor_member');

# docs/reference.md's contents: a link to each function, view and table it documents
# (### outbox.NAME), and each link leads to one.
my $reference = slurp_file("$FindBin::RealBin/../../docs/reference.md");
my ($contents) = $reference =~ /^(- \[Functions\].*?)^- \[Errors\]/ms;
ok(defined $contents, "docs/reference.md's contents list is found");
my %anchors = map { my $a = lc $_; $a =~ s/[^a-z0-9_ -]//g; $a =~ s/ /-/g; ($a => 1) }
  $reference =~ /^#{2,3} (.+?)\s*$/mg;
my %linked = map { $_ => 1 } ($contents // '') =~ /\]\(#([^)]+)\)/g;
my @documented = map { (my $a = $_) =~ s/\.//; $a } $reference =~ /^### (outbox\.\w+)\s*$/mg;
ok(@documented > 20, 'docs/reference.md documents its objects under ### outbox.NAME');
is_deeply([ grep { !$linked{$_} } @documented ], [],
	"docs/reference.md's contents link every function, view and table it documents");
is_deeply([ grep { !$anchors{$_} } sort keys %linked ], [],
	"every link of docs/reference.md's contents leads to a heading");

# The README's webhook snippet, as pasted: the files directory (a temporary one instead of
# /etc/outbox-sink-files), the secret file, the setting, configure_sink.
my ($http_files) = marked_blocks('README.md', 'quickstart-http-files');
my ($http_conf) = marked_blocks('README.md', 'quickstart-http-conf');
my ($http_sql) = marked_blocks('README.md', 'quickstart-http');
ok(defined $http_files && defined $http_conf && defined $http_sql,
	"the README has marked webhook blocks: files, configuration, configure_sink");
SKIP: {
	skip 'no openssl (Debian: openssl)', 12
	  unless eval { IPC::Run::run([ 'openssl', 'version' ], '>', \my $version) };
	my $files = PostgreSQL::Test::Utils::tempdir() . '/sink-files';
	my $user = getpwuid($>);
	(my $script = $http_files) =~ s{/etc/outbox-sink-files}{$files}g;
	$script =~ s/\bchown postgres:/chown $user:/g;
	($http_conf //= '') =~ s{/etc/outbox-sink-files}{$files}g;

	# Without the setting, the snippet fails: what the README did not show before.
	($rc, $out, $err) = $node->psql('shop', "BEGIN;\n$http_sql\nROLLBACK;");
	like($err, qr/outbox\.sink_files_directory is not set/,
		'without outbox.sink_files_directory, configure_sink refuses the secret file');

	my ($script_out, $script_err) = ('', '');
	ok(IPC::Run::run([ 'bash', '-euc', $script ], '>', \$script_out, '2>', \$script_err),
		"the README's commands make the files directory and the secret file") or diag($script_err);
	my $secret = slurp_file("$files/webhook.secret");
	like($secret, qr/^whsec_[A-Za-z0-9+\/]{43}=\n\z/, 'the secret file holds whsec_ and the base64 of 32 bytes');
	$node->append_conf('postgresql.conf', $http_conf);
	$node->reload;
	ok( $node->poll_query_until('shop', "SELECT current_setting('outbox.sink_files_directory') = '$files'"),
		'the setting is in force after the reload');

	# As pasted: configure_sink accepts it. Rolled back: the relay does not send to
	# hooks.example.com (the tests stay on the loopback).
	($rc, $out, $err) = $node->psql('shop', "BEGIN;\n$http_sql\nROLLBACK;", on_error_stop => 1);
	is($rc, 0, "the README's configure_sink('http', ...) runs as pasted") or diag($err);
	like($out, qr/^http url=https:\/\/hooks\.example\.com\/outbox\/\$\{aggregatetype\} .*signed \(1 secret\)$/m,
		'... and describes a signed webhook sink');

	# The same, to a receiver on 127.0.0.1 that verifies each request's signature with the
	# secret file's text, as Standard Webhooks prescribes.
	my $port_file = PostgreSQL::Test::Utils::tempdir() . '/port';
	my $log = PostgreSQL::Test::Utils::tempdir() . '/received';
	my $receiver = IPC::Run::start([ $^X, '-e', webhook_receiver(), "$files/webhook.secret", $port_file, $log ],
		'>', \my $receiver_out, '2>', \my $receiver_err);
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	usleep(50_000) until -s $port_file || time > $deadline;
	ok(-s $port_file, 'the receiver listens') or diag($receiver_err);
	my $port = -s $port_file ? slurp_file($port_file) : 0;
	(my $local_sql = $http_sql) =~ s{https://hooks\.example\.com}{http://127.0.0.1:$port}g;
	($rc, $out, $err) = $node->psql('shop', $local_sql, on_error_stop => 1);
	is($rc, 0, 'configured to the local receiver') or diag($err);
	my $id = $node->safe_psql('shop',
		q{SELECT outbox.enqueue('order', '3', 'OrderCreated', '{"order_id": 3}')});
	ok( $node->poll_query_until('shop',
			"SELECT published_at IS NOT NULL FROM outbox.event_status WHERE id = '$id'"),
		'the relay delivered the event to the webhook');
	# (at least once: a request may come twice; the sets count)
	my @received = map { [ split /\t/ ] } grep { /\S/ } split /\n/, slurp_file($log);
	my %ids = map { $_->[0] => 1 } @received;
	my %how = map { ("$_->[1] $_->[2]" => 1) } @received;
	is_deeply([ sort keys %ids ], [$id], 'the receiver got exactly that event');
	is_deeply([ sort keys %how ], ['verified /outbox/order'],
		"its signature verifies with the secret file's text, at the URL's path");
	$node->safe_psql('shop', q{SELECT outbox.configure_sink('null')});
	$receiver->kill_kill;
	is($receiver_err // '', '', 'the receiver reported no error');
}

# A webhook receiver (perl -e): verifies webhook-signature (v1,<base64 HMAC-SHA256 of
# "id.timestamp.body">, the key the base64 after whsec_), answers 200 and logs a line
# "id<TAB>verified|unverified<TAB>path" per request. Arguments: secret file, port file, log.
sub webhook_receiver {
	return <<'PERL';
use strict;
use warnings;
use IO::Socket::INET;
use Digest::SHA qw(hmac_sha256_base64);
use MIME::Base64;
my ($secret_file, $port_file, $log) = @ARGV;
open my $fh, '<', $secret_file or die "$secret_file: $!";
my $secret = do { local $/; <$fh> };
$secret =~ s/\r?\n\z//;
$secret =~ s/^whsec_// or die "the secret does not start with whsec_\n";
my $key = decode_base64($secret);
my $server = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 16,
	ReuseAddr => 1) or die "listen: $!";
open my $pf, '>', "$port_file.tmp" or die $!;
print $pf $server->sockport;
close $pf;
rename "$port_file.tmp", $port_file or die $!;
while (my $c = $server->accept) {
	local $/ = "\r\n";
	my $line = <$c> // next;
	my ($path) = $line =~ m{^POST (\S+) HTTP/};
	my %h;
	while (my $header = <$c>) {
		last if $header eq "\r\n";
		$h{ lc $1 } = $2 if $header =~ /^([^:]+):\s*(.*?)\r\n\z/;
	}
	my $body = '';
	read($c, $body, $h{'content-length'} // 0);
	my $expected = hmac_sha256_base64("$h{'webhook-id'}.$h{'webhook-timestamp'}.$body", $key);
	$expected .= '=' while length($expected) % 4;
	my $verified = grep { $_ eq "v1,$expected" } split ' ', $h{'webhook-signature'} // '';
	open my $out, '>>', $log or die $!;
	print $out join("\t", $h{'webhook-id'} // '', $verified ? 'verified' : 'unverified', $path // ''), "\n";
	close $out;
	print $c "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
	close $c;
}
PERL
}

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

# operations.md's replay example, as pasted, on a new database (issue 43: it was refused
# there, blaming outbox.retention): rotation has dropped nothing, so a window before the
# oldest partition holds no lost event.
my ($replay_sql) = marked_blocks('docs/operations.md', 'replay-window');
ok(defined $replay_sql, 'operations.md has the replay example');
$node->safe_psql('postgres', 'CREATE DATABASE replays');
$node->safe_psql('replays', q{CREATE EXTENSION outbox;
	SELECT outbox.enqueue('order', '1', 'OrderCreated', '{}')});
my ($replay_rc, $replay_out, $replay_err) = $node->psql('replays', $replay_sql, on_error_stop => 1);
is($replay_rc, 0, 'the replay example runs as pasted on a new database') or diag($replay_err);
is($node->safe_psql('replays', 'SELECT id, state FROM outbox.replays'), '1|cancelled',
	'its replay 1 was made, then cancelled');
$node->safe_psql('postgres', 'DROP DATABASE replays');

$node->stop;
done_testing();
