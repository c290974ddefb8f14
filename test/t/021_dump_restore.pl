# pg_dump and restore, custom format through pg_restore and plain through psql, both with
# errors fatal (--exit-on-error, ON_ERROR_STOP): no error at all; from a database of the
# tested major, and from one of an older major when OUTBOX_UPGRADE_FROM names its
# installation (an upgrade by dump and restore). After each restore:
#  - every event that was not published is delivered, once; published ones are not sent
#    again, and dead letters stay dead letters;
#  - new events are delivered, with seq values above the restored ones;
#  - the partitions are back under rotate()'s management, and the sink configuration is back;
#  - a consumer's inbox in the same database keeps its records, and still tells a copy;
#  - a consumer name bound to a role is bound to the role of that name, which DROP ROLE
#    then refuses.
# The source runs no relay (outbox.workers = 0), so that the events keep the states given
# here; each restore runs on its own server with a relay, both sending to one Kafka topic.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

use FindBin;
use lib $FindBin::Bin;
use KafkaMock;
use OutboxNode;

plan skip_all => 'no ' . KafkaMock::binary() unless -x KafkaMock::binary();

my $mock = KafkaMock->start(1);
my $bootstrap = $mock->bootstrap;

sub enqueue {
	my ($node, $n, $tag, $db) = @_;
	return split /\n/, $node->safe_psql($db // 'postgres', qq{
SELECT unnest(outbox.enqueue_batch((SELECT jsonb_agg(jsonb_build_object(
  'aggregatetype', 'order', 'aggregateid', (i % 4)::text, 'type', '$tag', 'payload', jsonb_build_object('i', i)))
  FROM generate_series(1, $n) i)))});
}

# Dumps a source node made with %$source_opt (install_path: an older major's installation,
# whose database the tested major's pg_dump reads, as an upgrade by dump and restore does)
# and restores it twice; returns the ids of the source's events by state, and of the new
# events of each restore.
sub dump_and_restore {
	my ($label, %source_opt) = @_;
	my %ids;
	my $source = relay_node("source_$label", "outbox.workers = 0\n", %source_opt);
	$source->safe_psql('postgres', 'CREATE EXTENSION outbox');
	$source->safe_psql('postgres', qq{SELECT outbox.configure_sink('kafka', '{"bootstrap.servers": "$bootstrap"}')});
	$ids{published} = [ enqueue($source, 30, 'published') ];
	$ids{pending} = [ enqueue($source, 20, 'pending') ];
	$ids{dead} = [ enqueue($source, 3, 'dead') ];
	$ids{retry} = [ enqueue($source, 2, 'retry') ];
	$source->safe_psql('postgres', q{
UPDATE outbox.events SET published_at = now() WHERE type = 'published';
UPDATE outbox.events SET dead_at = now(), attempts = 10, last_error = 'refused' WHERE type = 'dead';
UPDATE outbox.events SET next_attempt_at = now(), attempts = 1, last_error = 'refused' WHERE type = 'retry';
});
	# A consumer's inbox in the same database: its records of the published events.
	$source->safe_psql('postgres',
		q{SELECT count(outbox.inbox_receive('billing', id)) FROM outbox.events WHERE type = 'published'});
	# Its name bound to a role (0.7.0): dumped by the role's name, which the restoring
	# cluster has under another oid.
	my $bindings = $source->safe_psql('postgres', q{SELECT to_regclass('outbox.inbox_consumers') IS NOT NULL}) eq 't';
	$source->safe_psql('postgres', q{CREATE ROLE billing_app; SELECT outbox.bind_inbox_consumer('billing', 'billing_app')})
	  if $bindings;
	my $inbox_sql = q{SELECT string_agg(consumer || ' ' || event_id, ',' ORDER BY event_id) FROM outbox.inbox};
	my $inbox = $source->safe_psql('postgres', $inbox_sql);
	my $inbox_partitions = $source->safe_psql('postgres',
		'SELECT string_agg(name, \',\' ORDER BY name) FROM outbox.inbox_partitions');
	my $max_seq = $source->safe_psql('postgres', 'SELECT max(seq) FROM outbox.events');
	my $partitions = $source->safe_psql('postgres', 'SELECT string_agg(name, \',\' ORDER BY name) FROM outbox.partitions');
	my $sink_config = $source->safe_psql('postgres', 'SELECT sink || \' \' || options::text FROM outbox.sink_config');

	# The tested major's pg_dump, whatever the source's major: the newer one reads an older
	# server, as PostgreSQL's documentation asks of an upgrade by dump and restore.
	my $dir = $source->basedir;
	my ($out, $err);
	ok(IPC::Run::run([ 'pg_dump', '-Fc', '-f', "$dir/dump.custom", '-d', $source->connstr('postgres') ], '2>', \$err),
		"$label: pg_dump -Fc");
	is($err, '', '... without a message');
	ok(IPC::Run::run([ 'pg_dump', '-f', "$dir/dump.sql", '-d', $source->connstr('postgres') ], '2>', \$err),
		"$label: pg_dump (plain)");
	$source->stop;

	my %restore = (
		custom => [ 'pg_restore', '--exit-on-error', '-d', "$dir/dump.custom" ],
		plain => [ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', "$dir/dump.sql", '-d' ],
	);
	for my $format (sort keys %restore) {
		my $node = relay_node("restored_${label}_$format", "outbox.database = 'restored'\n");
		$node->safe_psql('postgres', 'CREATE DATABASE restored');
		# The roles come first (pg_dumpall --globals-only); another role takes the oid first.
		$node->safe_psql('postgres', 'CREATE ROLE not_billing; CREATE ROLE billing_app') if $bindings;
		my @command = @{ $restore{$format} };
		if ($format eq 'custom') {
			splice @command, 3, 0, $node->connstr('restored');
		} else {
			push @command, $node->connstr('restored');
		}
		($out, $err) = ('', '');
		my $ok = IPC::Run::run(\@command, '>', \$out, '2>', \$err);
		ok($ok, "$label: the $format restore succeeds");
		is($err, '', "... with no error or warning") or diag($err);

		ok( $node->poll_query_until('restored',
				q{SELECT count(*) = 0 FROM outbox.event_status WHERE type IN ('pending', 'retry') AND published_at IS NULL}),
			"$label, $format: the unpublished events are delivered");
		is($node->safe_psql('restored', q{SELECT dead_lettered FROM outbox.status}), '3',
			"$label, $format: dead letters stay dead letters");
		is($node->safe_psql('restored', 'SELECT string_agg(name, \',\' ORDER BY name) FROM outbox.partitions'),
			$partitions, "$label, $format: the partitions' bookkeeping is back");
		is($node->safe_psql('restored', q{SELECT count(*) FROM outbox.partitions p
		      WHERE to_regclass(format('outbox.%I', p.name)) IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'outbox.events'::regclass)}),
			scalar(split /,/, $partitions), "$label, $format: every partition is attached");
		is($node->safe_psql('restored', $inbox_sql), $inbox, "$label, $format: the inbox's records are back");
		is($node->safe_psql('restored', 'SELECT string_agg(name, \',\' ORDER BY name) FROM outbox.inbox_partitions'),
			$inbox_partitions, "$label, $format: the inbox's partitions' bookkeeping is back");
		is($node->safe_psql('restored', qq{SELECT outbox.inbox_receive('billing', '$ids{published}[0]')}), 'f',
			"$label, $format: the inbox still tells a copy");
		if ($bindings) {
			is($node->safe_psql('restored', q{SELECT string_agg(consumer || ' ' || role::text, ',') FROM outbox.inbox_consumers}),
				'billing billing_app', "$label, $format: the consumer name is bound to its role again");
			my ($drop_rc, $drop_out, $drop_err) = $node->psql('restored', 'DROP ROLE billing_app');
			like($drop_err, qr/privileges for column role of table outbox.inbox_consumers/,
				"$label, $format: the bound role cannot be dropped");
			$node->safe_psql('restored', q{SELECT outbox.unbind_inbox_consumer('billing', 'billing_app')});
		}
		my ($rc, $rotate_out, $rotate_err) = $node->psql('restored', 'SELECT count(*) FROM outbox.rotate()');
		is($rc, 0, "$label, $format: rotate() runs") or diag($rotate_err);
		is($node->safe_psql('restored', 'SELECT sink || \' \' || options::text FROM outbox.sink_config'),
			$sink_config, "$label, $format: the sink configuration is back");

		$ids{"new_$format"} = [ enqueue($node, 5, "new-$format", 'restored') ];
		ok( $node->poll_query_until('restored',
				qq{SELECT count(*) = 0 FROM outbox.event_status WHERE type = 'new-$format' AND published_at IS NULL}),
			"$label, $format: new events are delivered");
		ok($node->safe_psql('restored', qq{SELECT min(seq) > $max_seq FROM outbox.events WHERE type = 'new-$format'}) eq 't',
			"$label, $format: new events take seq values above the restored ones");
		$node->stop;
	}
	return \%ids;
}

# From a database of the tested major; and, when the tests are given an older major's
# installation with outbox (test/run-tests.sh on 17 or 18: Debian's 15), from that one.
my %sources = (same_major => dump_and_restore('same_major'));
$sources{from_old_major} = dump_and_restore('from_old_major', install_path => $ENV{OUTBOX_UPGRADE_FROM})
  if $ENV{OUTBOX_UPGRADE_FROM};

# One topic for every restore: each unpublished event exactly twice (once per restore of its
# source), the rest as they should be.
my %count;
for my $line ($mock->consume('outbox.event.order', '%h\n')) {
	$count{$1}++ if $line =~ /(?:^|,)id=([0-9a-f-]{36})/;
}
for my $label (sort keys %sources) {
	my $ids = $sources{$label};
	is(scalar(grep { ($count{$_} // 0) != 2 } @{ $ids->{pending} }, @{ $ids->{retry} }), 0,
		"$label: each unpublished event was delivered once per restore");
	is(scalar(grep { $count{$_} } @{ $ids->{published} }), 0, "$label: no published event was sent again");
	is(scalar(grep { $count{$_} } @{ $ids->{dead} }), 0, "$label: no dead letter was sent");
	is(scalar(grep { ($count{$_} // 0) != 1 } @{ $ids->{new_custom} }, @{ $ids->{new_plain} }), 0,
		"$label: each new event was delivered once");
}

$mock->stop;
done_testing();
