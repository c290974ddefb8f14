# Metrics (docs/monitoring.md). The null sink writes a line per acknowledged message to its
# record_file (an independent consumer), and the counters must agree with it:
#  - events sent, batches, bytes and the latency histogram's count, per sink, equal what the
#    consumer received and what the events hold;
#  - a relay stopped by pg_terminate_backend is started again and its counters go on: no
#    counter goes backwards; its start and clean exit are counted;
#  - rejections and dead letters are counted; requeue_dead() counts at commit, not in a
#    transaction that rolls back;
#  - a sink that cannot be created (its record_file removed between configure_sink and the
#    relay's read) is a configuration error: backoffs counted, config_error 1, and cleared
#    by the next acknowledgement once the file is back;
#  - outbox.metrics() is valid Prometheus text (promtool check metrics), read by a role in
#    pg_monitor only, also in a SQL_ASCII database named with bytes that are not UTF-8 (each
#    such byte written as the characters \xHH);
#  - prometheus-postgres-exporter with monitoring/postgres_exporter.yml, as that role,
#    scraped over HTTP as Prometheus would, gives the same numbers without a scrape error,
#    and they move as events flow.
use strict;
use warnings;
use HTTP::Tiny;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my ($node, $record_file) = OutboxNode::record_node('metrics', qq{
outbox.max_attempts = 2
outbox.retry_backoff_min = '50ms'
outbox.retry_backoff_max = '200ms'
});
my $files = $node->basedir . '/sink_files';
sub q1 { return $node->safe_psql('postgres', $_[0]); }
sub lines {
	my $path = shift // $record_file;
	open my $fh, '<', $path or die "$path: $!";
	my @l = <$fh>;
	close $fh;
	return scalar @l;
}

q1('CREATE EXTENSION outbox');
q1(q{SELECT outbox.configure_sink('null', '{"record_file": "deliveries.tsv"}')});
for my $t (1 .. 3) {
	q1(qq{SELECT count(outbox.enqueue('order', 'k' || i % 7, 'created',
	                                   jsonb_build_object('n', i, 'pad', repeat('x', i % 50))))
	        FROM generate_series(1, 100) i});
}
OutboxNode::wait_published($node, 'true', '300 events published');
ok($node->poll_query_until('postgres', q{SELECT events_sent_total = 300 FROM outbox.sink_metrics}),
	'the sink counts 300 events sent');
is(lines(), 300, 'the consumer received 300');
is( q1(q{SELECT (SELECT bytes_sent_total FROM outbox.sink_metrics)
              = (SELECT sum(octet_length(payload::text)) FROM outbox.events)}),
	't', 'bytes sent: the payloads\' bytes');
is( q1(q{SELECT count = 300 AND bucket[array_length(bucket, 1)] <= 300
           FROM outbox.histogram_metrics WHERE histogram = 'delivery_latency_seconds'}),
	't', 'the latency histogram counts each event once');
is( q1(q{SELECT h.sum::int8 = 300 AND h.count = m.batches_total
           FROM outbox.histogram_metrics h, outbox.sink_metrics m
          WHERE h.histogram = 'batch_size_events'}),
	't', 'the batch size histogram: 300 events over the counted batches');

# A relay stopped and started again goes on counting.
my %before = split /[|\n]/, q1(q{SELECT 'starts', relay_starts_total, 'clean', relay_exits_clean_total
                                   FROM outbox.database_metrics});
my $pid = q1(q{SELECT pid FROM outbox.status});
q1("SELECT pg_terminate_backend($pid)");
ok( $node->poll_query_until('postgres',
		qq{SELECT pid IS NOT NULL AND pid <> $pid AND state = 'idle' FROM outbox.status}),
	'the relay is started again');
is( q1(q{SELECT events_sent_total FROM outbox.relay_metrics}), '300',
	'the worker\'s counter goes on after its restart');
is( q1(qq{SELECT relay_starts_total - $before{starts} || ' ' || relay_exits_clean_total - $before{clean}
            FROM outbox.database_metrics}),
	'1 1', 'its start and its clean exit are counted');
q1(q{SELECT count(outbox.enqueue('order', 'k' || i, 'created', '{}')) FROM generate_series(1, 50) i});
ok( $node->poll_query_until('postgres',
		q{SELECT s.events_sent_total = 350 AND r.events_sent_total = 350
		    FROM outbox.sink_metrics s, outbox.relay_metrics r}),
	'both counters reach 350');
is(lines(), 350, 'the consumer received 350');

# Rejections and dead letters; requeue counted at commit only.
q1(q{SELECT outbox.configure_sink('null', '{"record_file": "deliveries.tsv",
        "reject_aggregateid": "bad", "reject_times": 1000}')});
q1(q{SELECT outbox.enqueue('order', 'bad', 'created', '{}')});
ok( $node->poll_query_until('postgres',
		q{SELECT events_rejected_total = 2 AND events_dead_lettered_total = 1 FROM outbox.sink_metrics}),
	'two rejections, one dead letter');
is(q1(q{SELECT dead_letters FROM outbox.database_metrics}), '1', 'the dead letter gauge');
q1(q{BEGIN; SELECT outbox.requeue_dead(); ROLLBACK});
is(q1(q{SELECT events_requeued_total FROM outbox.database_metrics}), '0',
	'a requeue rolled back is not counted');
q1(q{SELECT outbox.configure_sink('null', '{"record_file": "deliveries.tsv"}')});
is(q1(q{SELECT outbox.requeue_dead()}), '1', 'requeued');
is(q1(q{SELECT events_requeued_total FROM outbox.database_metrics}), '1', 'the requeue is counted');
OutboxNode::wait_published($node, q{aggregateid = 'bad'}, 'the requeued event is published');

# A sink that cannot be created: a configuration error, backed off, cleared once it works.
my $spare = "$files/spare.tsv";
open my $fh, '>', $spare or die $!;
close $fh;
chmod 0644, $spare;
my $backoffs = q1(q{SELECT backoffs_total FROM outbox.sink_metrics});
my $session = $node->background_psql('postgres');
$session->query_safe(q{BEGIN; SELECT outbox.configure_sink('null', '{"record_file": "spare.tsv"}')});
unlink $spare or die $!;
$session->query_safe('COMMIT');
$session->quit;
ok( $node->poll_query_until('postgres',
		qq{SELECT r.config_error = 1 AND r.last_error_current = 1 AND s.backoffs_total > $backoffs
		     FROM outbox.relay_metrics r, outbox.sink_metrics s}),
	'a sink that cannot be created: a configuration error, backed off');
like(q1(q{SELECT last_error FROM outbox.status}), qr/^sink configuration error: /,
	'outbox.status says it is the configuration');
open $fh, '>', $spare or die $!;
close $fh;
chmod 0644, $spare;
q1(q{SELECT outbox.enqueue('order', 'after', 'created', '{}')});
ok( $node->poll_query_until('postgres',
		q{SELECT config_error = 0 AND last_error_current = 0 FROM outbox.relay_metrics}),
	'the next acknowledgement clears it');

# outbox.metrics(), as a pg_monitor role; promtool checks the format.
q1(q{CREATE ROLE watcher LOGIN IN ROLE pg_monitor});
my $text = $node->safe_psql('postgres', 'SELECT outbox.metrics()', extra_params => [ '-U', 'watcher' ]);
like($text, qr/^outbox_sink_events_sent_total\{datname="postgres",sink="null"\} 352$/m,
	'outbox.metrics(): events sent');
like($text, qr/^outbox_delivery_latency_seconds_count\{datname="postgres",sink="null"\} 352$/m,
	'outbox.metrics(): the latency histogram');
my ($out, $err) = ('', '');
my $ok = IPC::Run::run [ 'promtool', 'check', 'metrics' ], '<', \"$text\n", '>', \$out, '2>', \$err;
ok($ok, 'promtool check metrics accepts outbox.metrics()') or diag("$out$err");
q1(q{CREATE ROLE outsider LOGIN});
my ($rc, $stdout, $stderr) = $node->psql('postgres', 'SELECT * FROM outbox.sink_metrics',
	extra_params => [ '-U', 'outsider' ]);
like($stderr, qr/permission denied/, 'a role outside pg_monitor reads no metrics');

# The exporter, with the repository's queries file, as the pg_monitor role: the series are
# there, and they move as events flow.
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $queries = "$FindBin::RealBin/../../monitoring/postgres_exporter.yml";
my $dsn = sprintf('host=%s port=%d user=watcher dbname=postgres sslmode=disable',
	$node->host, $node->port);
my $exporter = IPC::Run::start(
	[ 'prometheus-postgres-exporter', "--extend.query-path=$queries",
	  "--web.listen-address=127.0.0.1:$port", '--disable-default-metrics',
	  '--disable-settings-metrics' ],
	'>', \my $exporter_out, '2>', \my $exporter_log, init => sub { $ENV{DATA_SOURCE_NAME} = $dsn });
sub scrape {
	my ($want) = @_;
	my $text = '';
	for (1 .. 100) {
		my $response = HTTP::Tiny->new(timeout => 5)->get("http://127.0.0.1:$port/metrics");
		$text = $response->{success} ? $response->{content} : '';
		last if $text =~ $want;
		usleep(100_000);
	}
	return $text;
}
my $sent = qr/^outbox_sink_events_sent_total\{datname="postgres",server="[^"]*",sink="null"\} (\d+)$/m;
my $scraped = scrape($sent);
like($scraped, qr/^outbox_sink_events_sent_total\{datname="postgres",server="[^"]*",sink="null"\} 352$/m,
	'the exporter: events sent') or diag($exporter_log // '');
like($scraped, qr/^outbox_delivery_latency_seconds_count\{datname="postgres",server="[^"]*",sink="null"\} 352$/m,
	'the exporter: the latency histogram counts every event delivered');
like($scraped, qr/^outbox_batch_size_events_bucket\{datname="postgres",server="[^"]*",sink="null",le="\+Inf"\} \d+$/m,
	'the exporter: the batch size histogram');
like($scraped, qr/^outbox_relay_state_info\{datname="postgres",server="[^"]*",state="idle",worker="1"\} 1$/m,
	'the exporter: the relay\'s state');
like($scraped, qr/^outbox_unpublished\{datname="postgres",server="[^"]*"\} 0$/m, 'the exporter: unpublished');
like($scraped, qr/^pg_exporter_last_scrape_error 0$/m, 'the exporter: no scrape error');
q1(q{SELECT count(outbox.enqueue('order', 'k' || i, 'created', '{}')) FROM generate_series(1, 48) i});
$scraped = scrape(qr/^outbox_sink_events_sent_total\{[^}]*\} 400$/m);
like($scraped, qr/^outbox_sink_events_sent_total\{datname="postgres",server="[^"]*",sink="null"\} 400$/m,
	'the exporter: events sent moves as events flow');
like($scraped, qr/^outbox_delivery_latency_seconds_count\{datname="postgres",server="[^"]*",sink="null"\} 400$/m,
	'the exporter: so does the latency histogram');
$exporter->kill_kill;
is(lines() + lines($spare), 400, 'the consumer received 400 (the later ones in spare.tsv)');

# One set of names: the exporter's, outbox.metrics()', docs/monitoring.md's, and those the
# alert rules and the Grafana dashboard use (a histogram by its family name).
sub families {
	my ($text) = @_;
	my %f;
	$f{$1} = 1 while $text =~ /^(outbox_[a-z_]+?)(?:_bucket|_sum|_count)?(?:\{| )/mg;
	return join ' ', sort keys %f;
}
sub file_names {
	my ($path) = @_;
	open my $fh, '<', $path or die "$path: $!";
	my $text = do { local $/; <$fh> };
	close $fh;
	my %f;
	while ($text =~ /\b(outbox_[a-z_]*[a-z])\b/g) {
		my $name = $1;
		$name =~ s/_(?:bucket|sum|count)$//;
		$f{$name} = 1;
	}
	return \%f;
}
$text = $node->safe_psql('postgres', 'SELECT outbox.metrics()', extra_params => [ '-U', 'watcher' ]);
my $ours = families($text);
is(families($scraped), $ours, 'the exporter gives the families outbox.metrics() gives');
my $documented = file_names("$FindBin::RealBin/../../docs/monitoring.md");
is(join(' ', sort keys %$documented), $ours, 'docs/monitoring.md names every family, and no other');
for my $file ('outbox-alerts.yml', 'grafana-dashboard.json') {
	my $used = file_names("$FindBin::RealBin/../../monitoring/$file");
	my @unknown = grep { $ours !~ /(?:^| )\Q$_\E(?: |$)/ } sort keys %$used;
	is("@unknown", '', "monitoring/$file uses no name the metrics lack");
}

# A SQL_ASCII database takes any bytes in names (issue 49): one named \xff\xfe, made from
# another SQL_ASCII database so that the bytes reach the server unconverted.
q1(q{CREATE DATABASE ascii ENCODING 'SQL_ASCII' TEMPLATE template0 LOCALE 'C'});
my $odd = "\xff\xfe";
$node->safe_psql('ascii',
	qq{CREATE DATABASE "$odd" ENCODING 'SQL_ASCII' TEMPLATE template0 LOCALE 'C'});
$node->safe_psql($odd, 'CREATE EXTENSION outbox');
$text = $node->safe_psql($odd, 'SELECT outbox.metrics()', extra_params => [ '-U', 'watcher' ]);
like($text, qr/^outbox_unpublished\{datname="\\\\xff\\\\xfe"\} 0$/m,
	'a name\'s bytes that are not UTF-8 are written as \xHH');
($out, $err) = ('', '');
$ok = IPC::Run::run [ 'promtool', 'check', 'metrics' ], '<', \"$text\n", '>', \$out, '2>', \$err;
ok($ok, 'promtool check metrics accepts it') or diag("$out$err");
$node->safe_psql('ascii', qq{DROP DATABASE "$odd"});
q1('DROP DATABASE ascii');

$node->stop;
done_testing();
