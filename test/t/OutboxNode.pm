# What the relay's TAP tests share: a node with outbox preloaded and the relay working in
# database postgres, and helpers that compare event ids as sets.
package OutboxNode;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use Test::More;

our @EXPORT = qw(relay_node ids wait_published enqueue_in_open_transaction);

# A started node named $name; $settings (postgresql.conf lines) come after the defaults.
sub relay_node {
	my ($name, $settings) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'outbox'
outbox.database = 'postgres'
outbox.poll_interval = '200ms'
} . ($settings // ''));
	$node->start;
	return $node;
}

# The sorted event ids that $sql returns, one per row.
sub ids {
	my ($node, $sql) = @_;
	return [ sort split /\n/, $node->safe_psql('postgres', $sql) ];
}

# Passes once no event matching $where is unpublished.
sub wait_published {
	my ($node, $where, $what) = @_;
	ok( $node->poll_query_until('postgres',
			"SELECT count(*) = 0 FROM outbox.events WHERE published_at IS NULL AND ($where)"),
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

1;
