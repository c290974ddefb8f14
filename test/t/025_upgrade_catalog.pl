# An installation updated along the whole chain (CREATE EXTENSION outbox VERSION '0.1.0';
# ALTER EXTENSION outbox UPDATE) has the same catalog as a fresh install of the current
# version (one script, outbox--<default_version>.sql), in two databases of one server:
#  - the schema as pg_dump --binary-upgrade dumps it (every member object of the extension,
#    with its definition, comment, owner, initial and current privileges, and membership;
#    and the partitions, which are not members);
#  - the extension's members (pg_depend), its row (configuration tables), the schema;
#  - each function's signature, owner, ACL, settings (proconfig) and attributes; each
#    relation's owner, ACL and options; the initial privileges; the event trigger.
# A difference means an update script or the install script is wrong.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('catalog');
$node->init;
$node->start;

my %db = (fresh => 'fresh', upgraded => 'upgraded');
$node->safe_psql('postgres', "CREATE DATABASE $_") for sort values %db;
# Back to back: the partitions are made from the clock.
$node->safe_psql('fresh', 'CREATE EXTENSION outbox');
$node->safe_psql('upgraded', q{CREATE EXTENSION outbox VERSION '0.1.0'});
$node->safe_psql('upgraded', 'ALTER EXTENSION outbox UPDATE');

my $default_version = $node->safe_psql('postgres',
	q{SELECT default_version FROM pg_available_extensions WHERE name = 'outbox'});
for my $which (sort keys %db) {
	is($node->safe_psql($db{$which}, q{SELECT extversion FROM pg_extension WHERE extname = 'outbox'}),
		$default_version, "$which: at the default version, $default_version");
}

# What may legitimately differ between the two databases, and nothing else:
#  - object ids, relfilenodes, and the WAL positions at which columns were made, which
#    pg_dump --binary-upgrade sets before each object (binary_upgrade_set_next_*), and the
#    tables' relfrozenxid and their TOAST tables' oids: each database numbers its own
#    objects and transactions;
#  - the oids of the configuration tables in binary_upgrade_create_empty_extension, which
#    also come in the order they were registered (0.4.0 registered outbox.events_seq last
#    on the update path, first in a fresh install): the "extension row" test below compares
#    them by name, as a set;
#  - the random key of pg_dump's \restrict line;
#  - the partitions' names and bounds, made from the clock when each install ran: the same
#    when both ran in the same partition interval, shifted by one interval when the clock
#    crossed an interval's end between the two (their number and shape stay the same).
sub normalise {
	my ($text) = @_;
	$text =~ s/^SELECT pg_catalog\.binary_upgrade_set_next_\w+\(.*\);\n//mg;
	$text =~ s/^(SET relfrozenxid = )'\d+', relminmxid = '\d+'$/$1<xid>/mg;
	$text =~ s/^(WHERE oid = )'\d+';$/$1<oid>;/mg;
	$text =~ s/^(SELECT pg_catalog\.binary_upgrade_create_empty_extension\('outbox', .*?), '\{[\d,]*\}', '\{[^}]*\}'/$1, <config>/mg;
	$text =~ s/^(\\(?:un)?restrict) \w+$/$1 <key>/mg;
	$text =~ s/\bevents_\d{8}_\d{6}/events_<time>/g;
	$text =~ s/'\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[+-]\d\d(?::\d\d)?)?'/'<time>'/g;
	return $text;
}

# is() for long text: fails with a unified diff of the two.
sub same_text {
	my ($what, $fresh, $upgraded) = @_;
	my $dir = $node->basedir;
	my $name = $what =~ s/\W+/_/gr;
	my %file = (fresh => "$dir/$name.fresh", upgraded => "$dir/$name.upgraded");
	PostgreSQL::Test::Utils::append_to_file($file{fresh}, $fresh);
	PostgreSQL::Test::Utils::append_to_file($file{upgraded}, $upgraded);
	my $diff = '';
	IPC::Run::run([ 'diff', '-u', $file{fresh}, $file{upgraded} ], '>', \$diff);
	ok($diff eq '' && $fresh ne '', "$what: the same after the update as after a fresh install")
	  or diag($diff);
}

# Each query's rows, from both databases, normalised and compared.
sub same_rows {
	my ($what, $sql) = @_;
	my %out = map { $_ => normalise($node->safe_psql($db{$_}, $sql)) } keys %db;
	same_text($what, $out{fresh}, $out{upgraded});
}

# The whole schema, members included: a plain pg_dump writes only CREATE EXTENSION for the
# members, --binary-upgrade writes each of them (as pg_upgrade needs them) with its ALTER
# EXTENSION ADD, and the initial privileges (pg_init_privs) apart from later grants.
my %dump;
for my $which (keys %db) {
	my ($out, $err) = ('', '');
	ok( IPC::Run::run(
			[ 'pg_dump', '--schema-only', '--binary-upgrade', '--no-sync', '-d', $node->connstr($db{$which}) ],
			'>', \$out, '2>', \$err),
		"pg_dump --binary-upgrade of $which");
	is($err, '', '... without a message');
	$dump{$which} = normalise($out);
}
like($dump{fresh}, qr/^ALTER EXTENSION outbox ADD FUNCTION outbox\.enqueue\(/m,
	'the dump has the members of the extension');
like($dump{fresh}, qr/^CREATE INDEX events_<time>_queue ON outbox\.events_<time>/m,
	'... and the partitions with their indexes');
same_text('pg_dump --binary-upgrade', $dump{fresh}, $dump{upgraded});

# \dx+ outbox: the members.
same_rows('extension members', q{
SELECT pg_describe_object(d.classid, d.objid, d.objsubid)
  FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND e.extname = 'outbox'
 ORDER BY 1});

same_rows('extension row', q{
SELECT e.extversion, pg_get_userbyid(e.extowner), e.extnamespace::regnamespace, e.extrelocatable,
       (SELECT string_agg(c.config::regclass || ' ' || quote_literal(c.condition), ', '
                          ORDER BY c.config::regclass::text)
          FROM unnest(e.extconfig, e.extcondition) c(config, condition))
  FROM pg_extension e WHERE e.extname = 'outbox'});

same_rows('schema', q{
SELECT n.nspname, pg_get_userbyid(n.nspowner), n.nspacl FROM pg_namespace n WHERE n.nspname = 'outbox'});

same_rows('functions', q{
SELECT p.oid::regprocedure, pg_get_userbyid(p.proowner), p.proacl, p.proconfig,
       p.prosecdef, p.provolatile, p.proparallel, p.proisstrict, p.prokind,
       pg_get_function_arguments(p.oid), pg_get_function_result(p.oid), l.lanname,
       md5(p.prosrc), p.probin
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE p.pronamespace = 'outbox'::regnamespace
 ORDER BY p.oid::regprocedure::text});

same_rows('relations', q{
SELECT c.oid::regclass, c.relkind, pg_get_userbyid(c.relowner), c.relacl, c.reloptions,
       c.relpersistence, c.relispartition
  FROM pg_class c
 WHERE c.relnamespace = 'outbox'::regnamespace
 ORDER BY c.oid::regclass::text});

same_rows('initial privileges', q{
SELECT pg_describe_object(i.classoid, i.objoid, i.objsubid), i.privtype, i.initprivs
  FROM pg_init_privs i
 WHERE pg_describe_object(i.classoid, i.objoid, i.objsubid) ~ 'outbox'
 ORDER BY 1});

same_rows('event triggers', q{
SELECT t.evtname, t.evtevent, t.evtfoid::regproc, pg_get_userbyid(t.evtowner), t.evtenabled, t.evttags
  FROM pg_event_trigger t ORDER BY 1});

$node->stop;
done_testing();
