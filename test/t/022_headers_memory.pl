# Headers count toward outbox.batch_max_bytes: events with huge headers (as a role could
# write before enqueue limited them, or with outbox.max_headers_bytes raised) do not take the
# relay's memory up with their number. 12 events with 20 MB headers each, batch_max_bytes =
# 16MB: the relay holds one or two at a time. (Before, it fetched all 12 into one batch.)
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $node = relay_node('headers', q{
outbox.batch_max_bytes = '16MB'
outbox.max_headers_bytes = '25MB'
});
$node->safe_psql('postgres', q{CREATE EXTENSION outbox; SELECT outbox.configure_sink('null')});
my $pid = $node->safe_psql('postgres', q{SELECT pid FROM outbox.status});

sub peak_rss_mb {
	open my $fh, '<', "/proc/$pid/status" or die "no relay process $pid";
	while (<$fh>) { return int($1 / 1024) if /^VmHWM:\s+(\d+) kB/; }
	die 'no VmHWM';
}
my $before = peak_rss_mb();
# One transaction, so that the relay sees all 12 at once.
$node->safe_psql('postgres', q{
SELECT count(outbox.enqueue('order', i::text, 'Big', '{}',
                            jsonb_build_object('h', repeat(chr(65 + i), 20 * 1024 * 1024))))
  FROM generate_series(1, 12) i});
wait_published($node, q{type = 'Big'}, 'the events with huge headers are delivered');
is($node->safe_psql('postgres', q{SELECT pid FROM outbox.status}), $pid, 'by the same relay process');
my $after = peak_rss_mb();
note("relay peak RSS: $before MB before, $after MB after");
# 12 x 20 MB in one batch is 240 MB of headers alone; two batches of one event are 40 MB.
cmp_ok($after - $before, '<', 150, 'the relay held a bounded number of them at a time');
cmp_ok($node->safe_psql('postgres', q{SELECT batches FROM outbox.status}), '>=', 6,
	'in several batches');

$node->stop;
done_testing();
