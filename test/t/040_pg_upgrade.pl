# pg_upgrade from an older major to the tested one, in --copy and --link modes, by the
# procedure of docs/operations.md ("Upgrading PostgreSQL"). OUTBOX_UPGRADE_FROM names the
# older installation, with outbox installed (test/run-tests.sh on 17 and 18: 15.18 as
# released, built with assertions).
#
# The old cluster has a sink configured (the null sink, recording each acknowledged message
# in a file) and, when it is upgraded:
#  - a dead letter (rejected outbox.max_attempts times) whose key's later events were sent;
#  - an event waiting for a retry (rejected, next_attempt_at set) with later events of its key
#    held behind it;
#  - a backlog of 10,000 unpublished events over 500 keys, in several partitions, written
#    while no relay ran (outbox.workers = 0), then the relay set to run again.
# After the upgrade, with no step but the documented ones:
#  - nothing was sent while pg_upgrade ran the old and the new server;
#  - the marks (relay_state, relay_shards) are those of the old cluster and still valid (the
#    sequence's file is the same: no reset, no warning), keys fall in the same shards, the
#    sink configuration, the partitions and the dead letters are there;
#  - every unpublished event is delivered, exactly once, compared as a set of ids; nothing
#    published before the upgrade is sent again; the dead letter stays one;
#  - per key, the deliveries follow seq (the retried event first, then those held behind it);
#  - new events are delivered, with seq values above the old ones.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $old_install = $ENV{OUTBOX_UPGRADE_FROM};
plan skip_all => 'OUTBOX_UPGRADE_FROM names no older installation with outbox '
  . '(test/run-tests.sh sets it on 17 and 18)'
  unless $old_install;

my @blocks = marked_blocks('docs/operations.md', 'pg_upgrade');
is(scalar @blocks, 1, 'docs/operations.md has one marked pg_upgrade procedure');
my $procedure_block = $blocks[0];
like($procedure_block, qr/--link   # or --copy$/m, '... which ends with pg_upgrade --link');

my $n_keys = 500;
my $chunks = 4;
my $per_chunk = 2500;

# The records of a null sink's record_file from line $from on: [aggregateid, id] in order.
sub records {
	my ($file, $from) = @_;
	my @lines = split /\n/, slurp_file($file);
	return [ map { my @f = split /\t/; [ $f[1], $f[2] ] } @lines[ $from .. $#lines ] ];
}

sub line_count {
	my @lines = split /\n/, slurp_file($_[0]);
	return scalar @lines;
}

# id => { seq, key (aggregateid), state } of every event; state: published, dead, retry or
# pending.
sub event_states {
	my ($node) = @_;
	my %events;
	for my $line (split /\n/, $node->safe_psql('postgres', q{
		SELECT id, seq, aggregateid, CASE state WHEN 'retrying' THEN 'retry' ELSE state END
		  FROM outbox.event_status}))
	{
		my ($id, $seq, $key, $state) = split /\|/, $line;
		$events{$id} = { seq => $seq, key => $key, state => $state };
	}
	return \%events;
}

# What must survive the upgrade unchanged, as one text per item.
my %kept = (
	'the marks' => q{SELECT r.low_water || ' ' || (r.seq_filenode = pg_relation_filenode('outbox.events_seq'))
	  || ' ' || (SELECT string_agg(shard || ':' || low_water, ',' ORDER BY shard) FROM outbox.relay_shards)
	  FROM outbox.relay_state r},
	'the shards of keys' => qq{SELECT string_agg(outbox.shard_of('order', 'k' || i)::text, ',' ORDER BY i)
	  FROM generate_series(0, $n_keys - 1) i},
	'the sink configuration' => q{SELECT sink || ' ' || options::text FROM outbox.sink_config},
	'the dead letters' => q{SELECT string_agg(id::text, ',' ORDER BY id) FROM outbox.dead_letters},
	'the partitions' => q{SELECT string_agg(name, ',' ORDER BY name) FROM outbox.partitions},
	'the inbox' => q{SELECT string_agg(consumer || ' ' || event_id, ',' ORDER BY event_id) FROM outbox.inbox},
	'the inbox partitions' => q{SELECT string_agg(name, ',' ORDER BY name) FROM outbox.inbox_partitions},
);

sub upgrade {
	my ($mode) = @_;

	# --- The old cluster.
	my $old = PostgreSQL::Test::Cluster->new("old_$mode", install_path => $old_install);
	$old->init;
	my $files = $old->basedir . '/sink_files';
	mkdir $files, 0750 or die "mkdir $files: $!";
	for my $name ('old.tsv', 'new.tsv') {
		open my $fh, '>', "$files/$name" or die "$files/$name: $!";
		close $fh;
		chmod 0644, "$files/$name";    # the null sink refuses a private file
	}
	# The procedure copies them into the new cluster's postgresql.conf.
	$old->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'outbox'
outbox.database = 'postgres'
outbox.poll_interval = '200ms'
outbox.sink_files_directory = '$files'
outbox.partition_interval = '1s'
outbox.premake = 30
outbox.max_attempts = 2
outbox.retry_backoff_min = '10ms'
outbox.retry_backoff_max = '10ms'
});
	$old->start;
	my $old_version = $old->safe_psql('postgres', 'SHOW server_version_num');
	note("upgrading from $old_version ($old_install)");
	$old->safe_psql('postgres', 'CREATE EXTENSION outbox');

	# A dead letter: its key's first event is rejected twice; the key's later events follow.
	$old->safe_psql('postgres', q{SELECT outbox.configure_sink('null',
	  '{"record_file": "old.tsv", "reject_aggregateid": "dead", "reject_times": "1000"}')});
	$old->safe_psql('postgres', q{SELECT outbox.enqueue('order', 'dead', 'T', '{}') FROM generate_series(1, 3)});
	# A consumer's inbox in the same database, with its records of those events.
	$old->safe_psql('postgres', q{SELECT count(outbox.inbox_receive('billing', id)) FROM outbox.events WHERE aggregateid = 'dead'});
	ok( $old->poll_query_until('postgres',
			q{SELECT dead_lettered = 1 AND unpublished = 0 FROM outbox.status}),
		"$mode: the old cluster has a dead letter, and its key's later events were sent");

	# A retry: this sink rejects it again every 5 s, until the new cluster's sink accepts it;
	# two events of its key are held behind it.
	$old->safe_psql('postgres', q{
		ALTER SYSTEM SET outbox.max_attempts = 1000;
		ALTER SYSTEM SET outbox.retry_backoff_min = '5s';
		ALTER SYSTEM SET outbox.retry_backoff_max = '5s';
		SELECT pg_reload_conf();});
	wait_relay_reloaded($old, { 'outbox.max_attempts' => '1000', 'outbox.retry_backoff_min' => '5000' },
		"$mode: the old relay has read the longer back-off");
	$old->safe_psql('postgres', q{SELECT outbox.configure_sink('null',
	  '{"record_file": "old.tsv", "reject_aggregateid": "retry", "reject_times": "1000"}')});
	$old->safe_psql('postgres', q{SELECT outbox.enqueue('order', 'retry', 'T', '{}') FROM generate_series(1, 3)});
	ok( $old->poll_query_until('postgres',
			q{SELECT count(*) = 1 FROM outbox.events WHERE aggregateid = 'retry' AND attempts >= 1 AND next_attempt_at IS NOT NULL}),
		"$mode: the old cluster has an event waiting for a retry");

	# The backlog, written while no relay runs, a chunk per partition or so.
	$old->append_conf('postgresql.conf', "outbox.workers = 0\n");
	$old->restart;
	for my $chunk (1 .. $chunks) {
		$old->safe_psql('postgres', qq{
			SELECT count(outbox.enqueue_batch((SELECT jsonb_agg(jsonb_build_object(
			  'aggregatetype', 'order', 'aggregateid', 'k' || (i % $n_keys), 'type', 'backlog',
			  'payload', jsonb_build_object('chunk', $chunk, 'i', i)))
			  FROM generate_series(1, $per_chunk) i)))});
		sleep 1 if $chunk < $chunks;
	}
	ok($old->safe_psql('postgres', q{SELECT count(DISTINCT tableoid) >= 3 FROM outbox.events WHERE type = 'backlog'}) eq 't',
		"$mode: the backlog spans partitions");
	my $before = event_states($old);
	my %kept_before = map { $_ => $old->safe_psql('postgres', $kept{$_}) } keys %kept;
	my $max_seq = $old->safe_psql('postgres', 'SELECT max(seq) FROM outbox.events');
	# The relay runs again, as it would on a cluster being upgraded.
	$old->append_conf('postgresql.conf', "outbox.workers = 1\n");
	$old->stop;
	my $sent_before = line_count("$files/old.tsv");

	# --- The new cluster, by the procedure of docs/operations.md as written: initdb, outbox's
	# settings, pg_upgrade --check, pg_upgrade. Its node gives the port and socket directory
	# the test then talks to the new server on.
	my $new = PostgreSQL::Test::Cluster->new("new_$mode");
	my $procedure = $procedure_block;
	$procedure =~ s/--link   # or --copy$/--$mode/m;
	$procedure =~ s/ --no-data-checksums$//m if $new->pg_version < 18;
	{
		local $ENV{old} = "$old_install/bin";
		local $ENV{new} = $new->config_data('--bindir');
		local $ENV{olddata} = $old->data_dir;
		local $ENV{newdata} = $new->data_dir;
		chdir $new->basedir or die "chdir: $!";    # pg_upgrade writes into its working directory
		command_ok([ 'bash', '-e', '-c', $procedure ], "$mode: the procedure (pg_upgrade --$mode)");
	}
	is(line_count("$files/old.tsv"), $sent_before, "$mode: nothing was sent while pg_upgrade ran");
	$new->append_conf('postgresql.conf', sprintf(qq{
port = %d
unix_socket_directories = '%s'
listen_addresses = ''
}, $new->port, $new->host));

	# --- After the upgrade. A first start without the relay, for a look at what it would
	# move (the marks); then the server as the procedure starts it.
	$new->append_conf('postgresql.conf', "outbox.workers = 0\n");
	$new->start;
	for my $item (sort keys %kept) {
		is($new->safe_psql('postgres', $kept{$item}), $kept_before{$item}, "$mode: kept: $item");
	}
	$new->append_conf('postgresql.conf', "outbox.workers = 1\n");
	$new->restart;
	ok( $new->poll_query_until('postgres',
			q{SELECT count(*) = 3 FROM outbox.event_status WHERE published_at IS NULL AND dead_at IS NULL}),
		"$mode: the backlog is delivered (but the retrying key)");
	# Rotation, as the cluster's pg_cron job would run it: partitions of 1 s with premake 30 cover
	# only 30 s after the old cluster's CREATE EXTENSION, which a slow run outlives; an event
	# past them would go to the newest partition with a WARNING (docs/reference.md).
	is($new->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE action NOT IN ('created', 'dropped')) FROM outbox.rotate()}),
		'0', "$mode: rotation runs on the new cluster");
	# The retry's sink rejected it for the old cluster; the new configuration accepts it.
	$new->safe_psql('postgres', q{SELECT outbox.configure_sink('null', '{"record_file": "new.tsv"}')});
	my @fresh = split /\n/, $new->safe_psql('postgres', qq{
		SELECT outbox.enqueue('order', 'k' || (i % $n_keys), 'after', jsonb_build_object('i', i))
		  FROM generate_series(1, 100) i});
	ok( $new->poll_query_until('postgres',
			q{SELECT unpublished = 0 FROM outbox.status}),
		"$mode: the retried event, the events held behind it and new events are delivered");
	is($new->safe_psql('postgres', qq{SELECT min(seq) > $max_seq FROM outbox.events WHERE type = 'after'}), 't',
		"$mode: new events take seq values above the old ones");
	my $after = event_states($new);
	is($new->safe_psql('postgres', q{SELECT bool_or(outbox.inbox_receive('billing', id)) FROM outbox.events WHERE aggregateid = 'dead'}),
		'f', "$mode: the inbox still tells copies");
	is($new->safe_psql('postgres', $kept{'the dead letters'}), $kept_before{'the dead letters'},
		"$mode: the dead letter is still one");

	# What the sink acknowledged after the upgrade, against what was unpublished before.
	my @delivered = (@{ records("$files/old.tsv", $sent_before) }, @{ records("$files/new.tsv", 0) });
	my @expected = sort((grep { $before->{$_}{state} =~ /^(pending|retry)$/ } keys %$before), @fresh);
	my %seen;
	my @duplicates = grep { $seen{ $_->[1] }++ } @delivered;
	is_deeply([ sort keys %seen ], \@expected, "$mode: the unpublished events and the new ones are delivered, as a set");
	is(scalar(@duplicates), 0, "$mode: each once");
	my %last_seq;
	my @inversions;
	for my $record (@delivered) {
		my ($key, $id) = @$record;
		my $seq = $after->{$id}{seq} // next;
		push @inversions, "$key: $id" if ($last_seq{$key} // -1) > $seq;
		$last_seq{$key} = $seq;
	}
	is(scalar(@inversions), 0, "$mode: per key, in seq order")
	  or diag(join("\n", @inversions[ 0 .. 4 ]));
	# A reset mark would say so ("outbox.events_seq was reset"), in a WARNING.
	unlike(slurp_file($new->logfile), qr/(WARNING|ERROR):/, "$mode: no warning or error in the new server's log");
	$new->stop;
}

upgrade('copy');
upgrade('link');
done_testing();
