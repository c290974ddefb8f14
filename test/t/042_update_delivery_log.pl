# ALTER EXTENSION outbox UPDATE from 0.5.0, whose relay marked each delivered event on its row,
# to the delivery log (docs/design.md, "The delivery log"). The 0.5.0 catalog holds a queue in
# every state, as 0.5.0's relay leaves it: published (marked), pending, dead-lettered, waiting
# for a retry, and events held behind the retry. The consumer is the null sink's record_file.
#  - Before the update the relay sends nothing (it waits for it).
#  - The update writes no event row: published rows keep their published_at.
#  - After it, exactly the pending, retrying and held events are delivered, each once; nothing
#    published before is sent again; the retried event goes before the events of its key
#    held behind it; the dead letters stay dead letters.
#  - outbox.event_status says published for exactly the published and the delivered ids.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my ($node, $record_file) = record_node('update_log', q{
outbox.retry_backoff_min = '50ms'
outbox.retry_backoff_max = '200ms'
});

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub enqueue {
	my ($tag, $n, $keys) = @_;
	return split /\n/, q1(qq{SELECT unnest(outbox.enqueue_batch((SELECT jsonb_agg(jsonb_build_object(
		'aggregatetype', 'upd', 'aggregateid', '$tag-' || (i % $keys), 'type', '$tag', 'payload', jsonb_build_object('i', i)))
		FROM generate_series(1, $n) i)))});
}

q1(q{CREATE EXTENSION outbox VERSION '0.5.0'});
q1(q{SELECT outbox.configure_sink('null', '{"record_file": "deliveries.tsv"}')});
ok($node->poll_query_until('postgres', q{SELECT state = 'waiting for ALTER EXTENSION UPDATE' FROM outbox.status}),
	'at 0.5.0 the relay waits for the update');

# The queue as 0.5.0's relay leaves it.
my @published = enqueue('published', 50, 5);
q1(q{UPDATE outbox.events SET published_at = now() - interval '1 hour' WHERE type = 'published'});
my @dead = enqueue('dead', 3, 3);
q1(q{UPDATE outbox.events SET dead_at = now(), attempts = 10, last_error = 'rejected' WHERE type = 'dead'});
my @retrying = enqueue('retrying', 1, 1);    # key retrying-0
q1(q{UPDATE outbox.events SET attempts = 1, last_error = 'rejected', next_attempt_at = now() + interval '300 ms'
      WHERE type = 'retrying'});
my @held = split /\n/, q1(q{SELECT unnest(outbox.enqueue_batch((SELECT jsonb_agg(jsonb_build_object(
	'aggregatetype', 'upd', 'aggregateid', 'retrying-0', 'type', 'held', 'payload', jsonb_build_object('i', i)))
	FROM generate_series(1, 5) i)))});
my @pending = enqueue('pending', 500, 10);
my $marks = q1(q{SELECT string_agg(id::text || published_at::text, ',' ORDER BY id) FROM outbox.events WHERE type = 'published'});
is(-s $record_file, 0, 'nothing was sent at 0.5.0');
# This library's drop guard under 0.5.0's SQL (no delivery log yet) counts as 0.5.0 did:
# every event without published_at.
my ($rc, $out, $err) = $node->psql('postgres', 'DROP EXTENSION outbox');
like($err, qr/DROP EXTENSION would discard 509 events that were not published \(3 of them dead-lettered\)/,
	'at 0.5.0 the drop guard refuses DROP EXTENSION, with the count of 0.5.0\'s unpublished events');

# An operator role granted 0.5.0's requeue_dead(), which the update replaces by one with
# filters: the grant carries over.
q1(q{CREATE ROLE ops; GRANT USAGE ON SCHEMA outbox TO ops; GRANT EXECUTE ON FUNCTION outbox.requeue_dead() TO ops;
     GRANT SELECT ON outbox.dead_letters TO ops});

my $update_xid = q1(q{BEGIN; ALTER EXTENSION outbox UPDATE; SELECT pg_current_xact_id(); COMMIT;});
is(q1(q{SELECT extversion = default_version FROM pg_extension, pg_available_extensions WHERE extname = 'outbox' AND name = 'outbox'}),
	't', 'updated through 0.6.0 to the current version');
is(q1(qq{SELECT count(*) FROM outbox.events WHERE xmin::text = '$update_xid'}), '0', 'the update wrote no event row');
# The indexes that take keys in increasing order fill their pages (fewer, smaller splits),
# in the partitions 0.5.0 made too.
my ($filled, $indexes) = split /\|/, q1(q{
	SELECT count(*) FILTER (WHERE c.reloptions = '{fillfactor=100}'), count(*)
	  FROM pg_inherits i JOIN pg_index x ON x.indrelid = i.inhrelid
	  JOIN pg_class c ON c.oid = x.indexrelid
	 WHERE i.inhparent = 'outbox.events'::regclass
	   AND (c.relname LIKE '%\\_queue' OR c.relname LIKE '%\\_id')});
ok($indexes >= 2 && $filled == $indexes,
	"every partition's _queue and _id index is filled to 100 % ($filled of $indexes)");

wait_published($node, q{type IN ('pending', 'retrying', 'held')}, 'after the update the relay delivers the rest');
is(q1(q{SELECT string_agg(id::text || published_at::text, ',' ORDER BY id) FROM outbox.events WHERE type = 'published'}),
	$marks, "0.5.0's marks are kept as they were");

my (%count, @order);
for my $line (split /\n/, slurp_file($record_file)) {
	my (undef, $key, $id, $type) = split /\t/, $line;
	$count{$id}++;
	push @order, $type if $key eq 'retrying-0';
}
is_deeply([ sort keys %count ], [ sort @pending, @retrying, @held ],
	'the consumer got exactly the pending, retrying and held events');
is(scalar(grep { $_ > 1 } values %count), 0, 'each once: nothing is sent twice');
is($order[0], 'retrying', 'the retried event went before the events held behind it');
is_deeply(ids($node, q{SELECT id FROM outbox.event_status WHERE state = 'published'}),
	[ sort @published, @pending, @retrying, @held ], 'event_status: published is exactly the old and the new deliveries');
is_deeply(ids($node, q{SELECT id FROM outbox.dead_letters}), [ sort @dead ], 'the dead letters stay');
is(q1(q{SELECT unpublished || ' ' || dead_lettered FROM outbox.status}), '0 3', 'outbox.status agrees');
is(q1(q{SET ROLE ops; SELECT outbox.requeue_dead(type => 'dead', dry_run => true)}), '3',
	"the operator's grant on requeue_dead() carried over to the new one");
is(q1(q{SELECT count(*) FROM pg_proc WHERE proname LIKE '%requeue_dead%'}), '1', 'the old requeue_dead() is gone');

$node->stop;
done_testing();
