# Credentials given the documented way (a file under outbox.sink_files_directory, named by
# sasl.password_file) never show in any channel a role could read:
#  - the server log: statements (log_statement = 'all' in the configuring session), errors
#    (log_min_error_statement), and librdkafka's own debug lines relayed by the relay;
#  - pg_stat_activity and pg_stat_statements as seen by a pg_monitor role;
#  - outbox.status, outbox.sink_config, and a pg_dump of the database;
#  - error messages, also of a refused call that gave the secret inline by mistake (whose
#    statement the server log then leaves out).
# The Kafka mock speaks no SASL: the relay's attempts fail, which exercises the error paths.
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
my $secret = 'S3cret-' . join('', map { ('a' .. 'z')[ rand 26 ] } 1 .. 16);

my $node = PostgreSQL::Test::Cluster->new('secrets');
$node->init;
my $files = $node->basedir . '/sink_files';
mkdir $files, 0750 or die "mkdir $files: $!";
sub write_file {
	my ($name, $content, $mode) = @_;
	open my $fh, '>', "$files/$name" or die "$name: $!";
	print $fh "$content\n";
	close $fh;
	chmod $mode, "$files/$name";
}
write_file('kafka.password', $secret, 0600);
write_file('readable.password', $secret, 0644);
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'outbox, pg_stat_statements'
outbox.database = 'postgres'
outbox.poll_interval = '200ms'
outbox.sink_files_directory = '$files'
log_min_error_statement = error
log_statement = none
});
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION pg_stat_statements;
CREATE EXTENSION outbox;
CREATE ROLE watcher LOGIN IN ROLE pg_monitor;
});

# The documented way, in a session that logs every statement and stays connected (its last
# statement stays in pg_stat_activity).
my $admin = $node->background_psql('postgres');
$admin->query_safe(q{SET log_statement = 'all'});
my $description = $admin->query_safe(qq{SELECT outbox.configure_sink('kafka', '{
  "bootstrap.servers": "$bootstrap", "security.protocol": "sasl_plaintext",
  "sasl.mechanism": "PLAIN", "sasl.username": "relay", "sasl.password_file": "kafka.password",
  "debug": "security,broker,conf"}')});
unlike($description, qr/\Q$secret\E/, 'the description has no secret');
$node->safe_psql('postgres', q{SELECT outbox.enqueue('order', '1', 'OrderCreated', '{}')});
# The relay creates the sink with the secret and tries to authenticate, in vain.
ok( $node->poll_query_until('postgres', q{SELECT last_error IS NOT NULL FROM outbox.status}),
	'the relay tried and reports an error');

# The mistakes: the secret inline, and a secret file others can read. Refused, and neither
# the error nor the server log repeats the secret (with log_statement off, as by default:
# with it on, a statement is logged before it runs).
my ($rc, $out, $err) = $node->psql('postgres', qq{SELECT outbox.configure_sink('kafka',
  '{"bootstrap.servers": "$bootstrap", "sasl.password": "$secret"}')});
isnt($rc, 0, 'an inline secret is refused');
like($err, qr/option "sasl.password" is a secret and is never taken inline/, '... saying why');
($rc, $out, $err) = $node->psql('postgres', qq{SELECT outbox.configure_sink('kafka',
  '{"bootstrap.servers": "$bootstrap", "sasl.password_file": "readable.password"}')});
isnt($rc, 0, 'a secret file others can read is refused');
like($err, qr/the secret file is readable or writable by other users/, '... saying why');

# Every channel.
my %channels;
$channels{'error messages'} = $err;
$channels{'pg_stat_activity (pg_monitor)'} = $node->safe_psql('postgres',
	q{SET ROLE watcher; SELECT string_agg(coalesce(query, ''), E'\n') FROM pg_stat_activity});
$channels{'pg_stat_statements (pg_monitor)'} = $node->safe_psql('postgres',
	q{SET ROLE watcher; SELECT string_agg(query, E'\n') FROM pg_stat_statements});
$channels{'outbox.status (pg_monitor)'} = $node->safe_psql('postgres',
	q{SET ROLE watcher; SELECT string_agg(s::text, E'\n') FROM outbox.status s});
$channels{'outbox.sink_config'} = $node->safe_psql('postgres',
	q{SELECT string_agg(c::text, E'\n') FROM outbox.sink_config c});
my ($dump, $dump_err) = ('', '');
IPC::Run::run([ 'pg_dump', '-d', $node->connstr('postgres') ], '>', \$dump, '2>', \$dump_err);
$channels{'pg_dump'} = $dump;
like($channels{'pg_stat_activity (pg_monitor)'}, qr/sasl.password_file/,
	'pg_monitor sees the configuring statement (with the file name)');
like($dump, qr/kafka.password/, 'the dump has the sink configuration (with the file name)');
$admin->quit;
$node->stop;    # every log line is written
$channels{'server log'} = slurp_file($node->logfile);
like($channels{'server log'}, qr/librdkafka/, 'librdkafka logged through the relay');
like($channels{'server log'}, qr/LOG:  statement: SELECT outbox.configure_sink/,
	'log_statement logged the configuring statement');
for my $channel (sort keys %channels) {
	unlike($channels{$channel}, qr/\Q$secret\E/, "no secret in $channel");
}

$mock->stop;
done_testing();
