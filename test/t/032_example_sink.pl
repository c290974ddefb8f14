# The example sink of examples/sink (plain C, built out of tree against the installed
# outbox_sink.h; test/run-tests.sh builds and installs it): loaded through the C interface,
# its declared options checked by configure_sink, every committed event written once, in
# order per key, read back from its file and compared as sets of ids.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use JSON::PP;
use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $node = PostgreSQL::Test::Cluster->new('example_sink');
my $libdir = $node->config_data('--pkglibdir');
plan skip_all => "no $libdir/outbox_sink_file.so (make -C examples/sink install)"
  unless -f "$libdir/outbox_sink_file.so";

$node->init;
my $files = $node->basedir . '/sink_files';
mkdir $files, 0700 or die "mkdir $files: $!";
my $path = "$files/events.jsonl";
open my $fh, '>', $path or die "$path: $!";
close $fh;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'outbox'
outbox.database = 'postgres'
outbox.poll_interval = '200ms'
outbox.sink_files_directory = '$files'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION outbox');

# Options are checked against the sink's declaration, and by the sink itself.
my ($rc, $out, $err) = $node->psql('postgres',
	q{SELECT outbox.configure_sink('file', '{"path": "events.jsonl", "command": "rm -rf /"}')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/22023.*sink "file" has no option "command"/s, 'an undeclared option is refused (22023)');
($rc, $out, $err) = $node->psql('postgres', q{SELECT outbox.configure_sink('file', '{}')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/22023.*invalid options for sink "file".*DETAIL:  path is required/s,
	"the sink's own refusal comes back as its message (22023)");
($rc, $out, $err) = $node->psql('postgres',
	q{SELECT outbox.configure_sink('file', '{"path": "/etc/passwd"}')});
like($err, qr/outside outbox.sink_files_directory|not inside|sink_files_directory/,
	'a file option outside outbox.sink_files_directory is refused');
is($node->safe_psql('postgres', q{SELECT count(*) FROM outbox.sink_config}), '0',
	'nothing was configured by the refused calls');

my $description =
  $node->safe_psql('postgres', q{SELECT outbox.configure_sink('file', '{"path": "events.jsonl"}')});
is($description, "file $path", 'configured; the description comes from the C sink');

# 300 events over 10 keys, n = 1..30 per key, with headers; one rolled back.
my (%enqueued, %n_of);
for my $n (1 .. 30) {
	my $values = join ', ',
	  map { qq{('order', 'k$_', 'OrderCreated', '{"n": $n}', '{"trace": "t-k$_-$n"}')} } 1 .. 10;
	for my $id (split /\n/, $node->safe_psql('postgres', qq{
		SELECT outbox.enqueue(a, b, c, d::jsonb, e::jsonb) FROM (VALUES $values) v(a, b, c, d, e)})) {
		$enqueued{$id} = 1;
	}
}
$node->safe_psql('postgres',
	q{BEGIN; SELECT outbox.enqueue('order', 'k1', 'OrderCreated', '{"n": 999}'); ROLLBACK});
wait_published($node, 'true', 'every event published through the C sink');

open $fh, '<', $path or die "$path: $!";
my @lines = map { decode_json($_) } <$fh>;
close $fh;
is_deeply([ sort map { $_->{id} } @lines ], [ sort keys %enqueued ],
	'the file holds exactly the committed event ids, each once');
my %last;
my $in_order = 1;
for my $event (@lines) {
	my $key = $event->{aggregateid};
	$in_order = 0 if ($last{$key} // 0) >= $event->{payload}{n};
	$last{$key} = $event->{payload}{n};
}
ok($in_order, 'per key, the events arrive in their order (n strictly increasing)');
is($lines[0]{headers}{trace}, "t-$lines[0]{aggregateid}-$lines[0]{payload}{n}",
	"the event's own headers cross the C interface");
ok($lines[0]{created_at_unix_us} > 1_700_000_000_000_000, 'and its enqueue time');
is($node->safe_psql('postgres', q{SELECT sink FROM outbox.status}), $description,
	'outbox.status shows the sink');

$node->stop;
done_testing();
