# What the relay's TAP tests share: a node with outbox preloaded and the relay working in
# database postgres, and helpers that compare event ids as sets.
package OutboxNode;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use Test::More;

our @EXPORT = qw(relay_node ids wait_published);

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

1;
