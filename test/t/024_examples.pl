# The client examples of examples/ (plain SQL, Python with psycopg 3, Node.js with pg) run
# against a node with the relay and the null sink, so that they stay true: the event ids
# each one prints are exactly the events of its committed orders, the relay publishes them,
# and the transactions that rolled back left neither an order row nor an event.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $examples = "$FindBin::Bin/../../examples";
my $uuid = qr/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;

my $node = relay_node('examples');
$node->safe_psql('postgres', 'CREATE EXTENSION outbox');
$node->safe_psql('postgres', q{SELECT outbox.configure_sink('null')});
# The Quick start's table, as a user who followed it has it: the examples keep to their own.
$node->safe_psql('postgres',
	q{CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL, total numeric NOT NULL)});
# The examples connect with the libpq environment variables.
$ENV{PGHOST} = $node->host;
$ENV{PGPORT} = $node->port;
$ENV{PGDATABASE} = 'postgres';

# Runs a command (in $dir if given): (ok, stdout, stderr). A missing program is not ok.
sub run_in {
	my ($cmd, $dir) = @_;
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run($cmd, init => sub { chdir $dir or die "chdir $dir: $!" if defined $dir; },
			'>', \$out, '2>', \$err, IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	};
	$err .= $@ if $@;
	return ($ok, $out, $err);
}

# Runs an example and checks what it did against the database. Its lines:
#   committed order=<id> event=<uuid> (or events={<uuid>,...})
#   retried event=<uuid> returned=<uuid>
#   rolled back order=<id> ...
sub check_example {
	my ($name, $cmd, $dir) = @_;
	my ($ok, $out, $err) = run_in($cmd, $dir);
	ok($ok, "$name: runs") or return diag("stdout:\n$out\nstderr:\n$err");
	my (%events, @committed, @rolled_back, @rolled_back_events);
	for my $line (split /\n/, $out) {
		push @committed, $1 if $line =~ /^committed order=(\d+) /;
		push @rolled_back, $1 if $line =~ /^rolled back order=(\d+)/;
		$events{$_} = 1 for ($line =~ /^(?:committed|retried) / ? $line =~ /($uuid)/g : ());
		push @rolled_back_events, $1 if $line =~ /^rolled back .*event=($uuid)/;
		is($2, $1, "$name: enqueue again with the same id returns that id")
		  if $line =~ /^retried event=($uuid) returned=(\S+)$/;
	}
	ok(@committed && @rolled_back && %events, "$name: it committed orders with events and rolled one back")
	  or return diag("stdout:\n$out");
	my $committed = join(', ', map { "'$_'" } @committed);
	my $gone = join(', ', map { "'$_'" } @rolled_back);
	is_deeply(
		ids($node, "SELECT id FROM outbox.events WHERE aggregatetype = 'order' AND aggregateid IN ($committed)"),
		[ sort keys %events ], "$name: the ids it printed are exactly the events of its orders");
	is_deeply(ids($node, "SELECT id FROM example_orders WHERE id::text IN ($committed)"),
		[ sort @committed ], "$name: its committed orders are there");
	is_deeply(
		ids($node, "SELECT id::text FROM example_orders WHERE id::text IN ($gone)
		            UNION ALL SELECT id::text FROM outbox.events WHERE aggregateid IN ($gone)"),
		[], "$name: the order that rolled back left no row and no event");
	is(scalar(@rolled_back_events), 1, "$name: it names the rolled-back event")
	  if $name eq 'sql';
	is_deeply(ids($node, "SELECT id FROM outbox.events WHERE id = '$_'"), [],
		"$name: the rolled-back event $_ is not there") for @rolled_back_events;
	wait_published($node, 'id IN (' . join(', ', map { "'$_'" } keys %events) . ')',
		"$name: the relay publishes its events");
}

subtest 'SQL' => sub {
	check_example('sql', [ $node->installed_command('psql'), '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', "$examples/sql/orders.sql" ]);
};

subtest 'Python with psycopg 3' => sub {
	# The python3 first on PATH may lack Debian's psycopg (a pyenv, a virtualenv).
	my ($python) = grep { (run_in([ $_, '-c', 'import psycopg' ]))[0] } ('python3', '/usr/bin/python3');
	plan skip_all => 'no python3 with psycopg 3 (Debian: python3-psycopg)' unless $python;
	check_example('python', [ $python, "$examples/python/orders.py" ]);
};

subtest 'Node.js with pg' => sub {
	plan skip_all => 'no node (Debian: nodejs)' unless (run_in([ 'node', '--version' ]))[0];
	plan skip_all => 'no examples/node/node_modules, and no npm to install pg (Debian: npm)'
	  unless -d "$examples/node/node_modules" || (run_in([ 'npm', '--version' ]))[0];
	# A copy: npm ci writes node_modules there, and the checkout may be read-only.
	my $dir = PostgreSQL::Test::Utils::tempdir() . '/node';
	my ($ok, $out, $err) = run_in([ 'cp', '-a', "$examples/node", $dir ]);
	die "copying examples/node: $err" unless $ok;
	if (!-d "$dir/node_modules") {
		($ok, $out, $err) = run_in([ 'npm', 'ci', '--no-audit', '--no-fund' ], $dir);
		my ($why) = grep { /\S/ } split /\n/, $err;
		plan skip_all => 'npm ci failed (no network?): ' . ($why // 'no message') unless $ok;
	}
	check_example('node', [ 'node', "$dir/orders.js" ]);
};

$node->stop;
done_testing();
