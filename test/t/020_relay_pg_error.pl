# A PostgreSQL ERROR inside the relay's transaction: the relay aborts the transaction, logs
# the error and backs off, and the events go out once the cause is gone. The error is read
# after the abort has freed the transaction's memory, which an assert-enabled server
# overwrites: the copy must not live there (src/pg/boundary.hpp).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use OutboxNode;

my $node = relay_node('pg_error', qq{
outbox.retry_backoff_min = '10ms'
outbox.retry_backoff_max = '200ms'
});
$node->safe_psql('postgres', q{
CREATE EXTENSION outbox;
SELECT outbox.configure_sink('null');
});
ok($node->poll_query_until('postgres', q{SELECT state = 'idle' FROM outbox.status}),
	'the relay is idle');
my $pid = $node->safe_psql('postgres', 'SELECT pid FROM outbox.status');

# Recording a delivery now fails with an ERROR, with a detail and a context.
$node->safe_psql('postgres', q{
CREATE FUNCTION refuse_mark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'marking refused by a test trigger' USING DETAIL = 'the detail of the refusal';
END $$;
CREATE TRIGGER refuse_mark BEFORE INSERT ON outbox.deliveries
  FOR EACH ROW EXECUTE FUNCTION refuse_mark();
});
my $log_offset = -s $node->logfile;
my $id = $node->safe_psql('postgres', q{SELECT outbox.enqueue('order', '1', 'OrderCreated', '{}')});

ok( $node->poll_query_until('postgres',
		q{SELECT last_error = 'marking refused by a test trigger' FROM outbox.status}),
	'outbox.status shows the error');
ok($node->wait_for_log(qr/outbox relay 1: marking refused by a test trigger; retrying in/,
		$log_offset),
	'the relay logs the error and backs off');
like(slurp_file($node->logfile, $log_offset),
	qr/LOG:  marking refused by a test trigger\n.*DETAIL:  the detail of the refusal\n.*CONTEXT:  PL\/pgSQL function refuse_mark\(\)/,
	'the server log has the error with its detail and context');

$node->safe_psql('postgres', 'DROP TRIGGER refuse_mark ON outbox.deliveries');
wait_published($node, qq{id = '$id'}, 'the event is published once recording works again');
is($node->safe_psql('postgres', 'SELECT pid FROM outbox.status'), $pid,
	'the same relay process did it (no crash, no restart)');
unlike(slurp_file($node->logfile), qr/terminated by signal|TRAP:/,
	'no process crashed or failed an assertion');

$node->stop;
done_testing();
