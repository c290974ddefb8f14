# What the relay's TAP tests share: a node with outbox preloaded and the relay working in
# database postgres, helpers that compare event ids as sets, and the documentation's
# snippets (marked_blocks).
package OutboxNode;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils ();
use Test::More;
use Time::HiRes qw(usleep);
use FindBin;

our @EXPORT = qw(relay_node record_node ids wait_published enqueue_in_open_transaction wait_relay_pass
  wait_relay_reloaded wait_relay_idle marked_blocks);
# The tests of several databases (use OutboxNode qw(:DEFAULT :databases)).
our %EXPORT_TAGS = (
	databases => [
		qw(databases_node new_record_file recorded_ids db_ids add_database enqueue_in
		  wait_relay_in delivered_as_sets)
	]);
our @EXPORT_OK = @{ $EXPORT_TAGS{databases} };

# poll_query_until hands psql its query on stdin. While the server restarts after a crash,
# psql can fail to connect and exit before IPC::Run writes the query; IPC::Run then croaks
# "Broken pipe" and the test dies without a plan (seen in CI just after kill -9 of the
# relay). Such a try is one that did not match, and the poll goes on.
{
	no warnings 'redefine';
	my $poll = \&PostgreSQL::Test::Cluster::poll_query_until;
	*PostgreSQL::Test::Cluster::poll_query_until = sub {
		for (1 .. 100) {
			my $matched = eval { $poll->(@_) };
			return $matched unless $@;
			die $@ unless $@ =~ /Broken pipe/;
			usleep(100_000);
		}
		die "poll_query_until: psql exited before reading its query 100 times\n";
	};
}

# A started node named $name; $settings (postgresql.conf lines) come after the defaults.
# %opt: install_path, the PostgreSQL installation to run (default: PG_CONFIG's).
sub relay_node {
	my ($name, $settings, %opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name, %opt);
	$node->init;
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'outbox'
outbox.database = 'postgres'
outbox.poll_interval = '200ms'
} . ($settings // ''));
	$node->start;
	return $node;
}

# relay_node's node, with an empty record_file in outbox.sink_files_directory for the null
# sink (an independent consumer: a line per acknowledged message): ($node, its path).
sub record_node {
	my ($name, $settings) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	my $files = $node->basedir . '/sink_files';
	mkdir $files, 0750 or die "mkdir $files: $!";
	my $record_file = "$files/deliveries.tsv";
	open my $fh, '>', $record_file or die "$record_file: $!";
	close $fh;
	chmod 0644, $record_file;    # the null sink refuses a private file (it could be a secret)
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'outbox'
outbox.database = 'postgres'
outbox.poll_interval = '200ms'
outbox.sink_files_directory = '$files'
} . ($settings // ''));
	$node->start;
	return ($node, $record_file);
}

# The sorted event ids that $sql returns, one per row.
sub ids {
	my ($node, $sql) = @_;
	return [ sort split /\n/, $node->safe_psql('postgres', $sql) ];
}

# True once $sql returns 't' in database postgres, false after timeout_default seconds of
# wall time. poll_query_until counts tries instead (10 per second of timeout_default, each
# after 100 ms), which for a query of a second or more (event_status over 100,000 events on
# a cassert build) stretches a failure to most of an hour.
sub poll_until {
	my ($node, $sql) = @_;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline) {
		my $out = '';
		# eval: psql may fail to connect while the server restarts (see above).
		my $ret = eval { $node->psql('postgres', $sql, stdout => \$out, on_error_stop => 1) } // 1;
		return 1 if $ret == 0 && $out eq 't';
		usleep(100_000);
	}
	return 0;
}

# Passes once no event matching $where is unpublished; returns whether it passed.
sub wait_published {
	my ($node, $where, $what) = @_;
	return ok(poll_until($node, "SELECT count(*) = 0 FROM outbox.event_status WHERE published_at IS NULL AND ($where)"),
		$what);
}

# A background session whose open transaction has enqueued one event: ($session, $id).
# The event commits, or not, when the caller ends that transaction (an early transaction
# that commits late).
sub enqueue_in_open_transaction {
	my ($node, $aggregatetype, $aggregateid, $type) = @_;
	$type //= 'T';
	my $session = $node->background_psql('postgres');
	my $id = $session->query_safe(
		qq{BEGIN; SELECT outbox.enqueue('$aggregatetype', '$aggregateid', '$type', '{}');});
	$id =~ s/.*\n//s;
	chomp $id;
	return ($session, $id);
}

# Passes once a whole pass of the relay, from the top of its loop, has run after the call
# (or after the time $opt{after}, an SQL timestamptz, if later) and the relay reports
# $opt{waiting} again ('outbox relay: waiting for events' unless given); returns the start
# of that pass's last transaction. pg_stat_activity shows when the relay's last transaction
# began (query_start), not when its pass began: a pass whose transaction began after the
# call may have begun before it, but the pass after that one began after it. With
# $opt{wake}, each try reloads the configuration, which wakes a relay that waits a long
# outbox.poll_interval. One relay worker.
sub wait_relay_pass {
	my ($node, $what, %opt) = @_;
	my $waiting = $opt{waiting} // 'outbox relay: waiting for events';
	my $after = $opt{after} // "'-infinity'";
	my $start = $node->safe_psql('postgres', qq{
		SELECT greatest(max(query_start), $after) FROM pg_stat_activity WHERE backend_type = 'outbox relay'});
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	for my $pass (1, 2) {
		my $next = '';
		while ($next eq '') {
			return fail("$what (no relay pass after $start)") if time > $deadline;
			$node->safe_psql('postgres', 'SELECT pg_reload_conf()') if $opt{wake};
			$next = $node->safe_psql('postgres', qq{
				SELECT query_start FROM pg_stat_activity
				 WHERE backend_type = 'outbox relay' AND query = '$waiting' AND query_start > '$start'});
			usleep(100_000) if $next eq '';
		}
		$start = $next;
	}
	pass($what);
	return $start;
}

# After ALTER SYSTEM ... and pg_reload_conf(): passes once the relay has read the settings
# %$settings (name => value as pg_settings.setting shows it, in the base unit). A new
# session sees them once the postmaster has read them, and by then the postmaster has
# signalled the relay, which reads them at the top of its next pass.
sub wait_relay_reloaded {
	my ($node, $settings, $what) = @_;
	my $rows = join(', ', map { "('$_', '$settings->{$_}')" } sort keys %$settings);
	my $n = scalar(keys %$settings);
	$node->poll_query_until('postgres',
		"SELECT count(*) = $n FROM pg_settings WHERE (name, setting) IN ($rows)")
	  or return fail("$what (the postmaster did not read them)");
	return wait_relay_pass($node, $what, wake => 1);
}

# After a restart: passes once every event is published (or dead-lettered) and the relay
# reports waiting for events. Its first pass then found nothing, so it left no gap to probe
# and no retry due, and it waits for outbox.poll_interval: with a long one, only a commit
# (or a signal) wakes it.
sub wait_relay_idle {
	my ($node, $what) = @_;
	$node->poll_query_until('postgres', q{
		SELECT NOT EXISTS (SELECT 1 FROM outbox.event_status WHERE published_at IS NULL AND dead_at IS NULL)})
	  or return fail("$what (events are left to send)");
	return ok( $node->poll_query_until('postgres', q{
			SELECT query = 'outbox relay: waiting for events' FROM pg_stat_activity
			 WHERE backend_type = 'outbox relay'}),
		$what);
}

# A started node whose relays serve every database that has the extension (no
# outbox.database), with outbox.sink_files_directory for the null sinks' record files;
# $settings (postgresql.conf lines) come after the defaults.
sub databases_node {
	my ($name, $settings) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	my $files = sink_files($node);
	mkdir $files, 0750 or die "mkdir $files: $!";
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'outbox'
outbox.poll_interval = '200ms'
outbox.sink_files_directory = '$files'
} . ($settings // ''));
	$node->start;
	return $node;
}

sub sink_files { return $_[0]->basedir . '/sink_files'; }

# An empty record file "$name.tsv" in databases_node's sink_files directory: its path.
sub new_record_file {
	my ($node, $name) = @_;
	my $path = sink_files($node) . "/$name.tsv";
	open my $fh, '>', $path or die "$path: $!";
	close $fh;
	chmod 0644, $path;    # the null sink refuses a private file (it could be a secret)
	return $path;
}

# The sorted ids in the record file "$name.tsv", each once.
sub recorded_ids {
	my ($node, $name) = @_;
	my %ids;
	for my $line (split /\n/, PostgreSQL::Test::Utils::slurp_file(sink_files($node) . "/$name.tsv")) {
		my (undef, undef, $id) = split /\t/, $line;
		$ids{$id} = 1 if defined $id && $id =~ /^[0-9a-f-]{36}$/;
	}
	return [ sort keys %ids ];
}

# The sorted ids of every event in database $db.
sub db_ids {
	my ($node, $db) = @_;
	return [ sort split /\n/, $node->safe_psql($db, 'SELECT id FROM outbox.events') ];
}

# Database $db with the extension and a null sink writing to its own record file "$db.tsv".
# $opt{exists}: the database and its extension exist already (a clone): the sink only.
sub add_database {
	my ($node, $db, %opt) = @_;
	unless ($opt{exists}) {
		$node->safe_psql('postgres', "CREATE DATABASE $db");
		$node->safe_psql($db, 'CREATE EXTENSION outbox');
	}
	new_record_file($node, $db);
	$node->safe_psql($db, qq{SELECT outbox.configure_sink('null', '{"record_file": "$db.tsv"}')});
}

# $n events in database $db, over 7 keys.
sub enqueue_in {
	my ($node, $db, $n) = @_;
	$node->safe_psql($db, qq{SELECT outbox.enqueue('t', 'k' || (i % 7), 'T', jsonb_build_object('i', i))
	             FROM generate_series(1, $n) i});
}

# Passes once database $db has one relay, and it waits for events.
sub wait_relay_in {
	my ($node, $db, $what) = @_;
	ok( $node->poll_query_until('postgres', qq{
			SELECT count(*) = 1 FROM pg_stat_activity
			 WHERE backend_type = 'outbox relay' AND datname = '$db'
			   AND query = 'outbox relay: waiting for events'}),
		$what);
}

# Every event of $db is published and in the record file "$file.tsv" (default: "$db.tsv";
# a renamed database keeps its sink), and nothing else is.
sub delivered_as_sets {
	my ($node, $db, $file) = @_;
	$file //= $db;
	ok($node->poll_query_until($db, q{
			SELECT count(*) = 0 FROM outbox.event_status WHERE published_at IS NULL}),
		"$db: everything published");
	is_deeply(recorded_ids($node, $file), db_ids($node, $db), "$db: its record file holds exactly its events");
}

# The contents of the fenced blocks marked "<!-- test: $name -->" in $file, a path from the
# repository's root (test/t/../..: test/run-tests.sh copies README.md and docs/ beside test/),
# in order: the documentation's snippets, which the tests run as pasted.
sub marked_blocks {
	my ($file, $name) = @_;
	my $path = "$FindBin::RealBin/../../$file";
	open my $fh, '<', $path or die "cannot read $path: $!";
	my $text = do { local $/; <$fh> };
	close $fh;
	my @blocks;
	while ($text =~ /^<!-- test: \Q$name\E -->\n(?:[ \t]*\n)*```[^\n]*\n(.*?)^```[ \t]*$/msg)
	{
		push @blocks, $1;
	}
	return @blocks;
}

1;
