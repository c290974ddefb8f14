# A C++ exception thrown inside guard() (src/pg/boundary.hpp), where the relay's C++ code calls
# PostgreSQL, becomes an error the process survives, never std::terminate: the call fails
# with an ERROR and its SQLSTATE, the session goes on, the memory context is the caller's
# again, and the postmaster does not restart (an abort would make it end every connection).
# The exceptions come from the test module test/modules/guard, built with outbox's boundary
# (test/run-tests.sh installs it).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('guard');
my $libdir = $node->config_data('--pkglibdir');
plan skip_all => "no $libdir/outbox_guard_test.so (make -C test/modules/guard install)"
  unless -f "$libdir/outbox_guard_test.so";

$node->init;
$node->start;
$node->safe_psql('postgres', q{
	CREATE FUNCTION guard_throw(text) RETURNS void
	  AS 'outbox_guard_test', 'outbox_guard_throw' LANGUAGE C STRICT;
	CREATE FUNCTION guard_context_kept(text) RETURNS boolean
	  AS 'outbox_guard_test', 'outbox_guard_context_kept' LANGUAGE C STRICT;
});
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
# A session connected throughout: a restart of the server would end it.
my $bystander = $node->background_psql('postgres');
my $bystander_pid = $bystander->query_safe('SELECT pg_backend_pid()');

for my $case (
	[ 'runtime_error', qr/ERROR:  XX000: outbox: internal error: thrown inside guard\(\)/ ],
	[ 'bad_alloc',     qr/ERROR:  53200: outbox: out of memory/ ],
	[ 'nested',        qr/ERROR:  XX000: outbox: internal error: thrown inside a nested guard\(\)/ ],
	[ 'pg_error',      qr/ERROR:  XX000: a PostgreSQL error inside guard\(\)/ ])
{
	my ($kind, $expected) = @$case;
	my ($rc, $out, $err) = $node->psql('postgres', "SELECT guard_throw('$kind'); SELECT 'alive'",
		on_error_stop => 0, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, $expected, "$kind: an ERROR with its SQLSTATE");
	is($out, 'alive', "$kind: the session goes on");
}
is($node->safe_psql('postgres', q{SELECT guard_context_kept('runtime_error')}), 't',
	'after the exception, the memory context is the caller\'s again');

is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started,
	'the postmaster did not restart');
is($bystander->query_safe('SELECT pg_backend_pid()'), $bystander_pid,
	'the other session kept its connection');
$bystander->quit;
unlike(slurp_file($node->logfile), qr/terminated by signal|terminate called/,
	'no process died by a signal, none called std::terminate');

$node->stop;
done_testing();
