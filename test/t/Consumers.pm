# The independent consumers of test/consumers (npm: cloudevents, nats, standardwebhooks),
# installed once per test script into a temporary copy (npm ci writes node_modules there, and
# the checkout may be read-only).
package Consumers;

use strict;
use warnings;
use FindBin;
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Utils;

my $dir;

# The directory with node_modules installed, or (undef, why) when node or npm is missing.
sub dir {
	return $dir if $dir;
	my ($out, $err) = ('', '');
	return (undef, 'no node (Debian: nodejs)')
	  unless IPC::Run::run([ 'node', '--version' ], '>', \$out, '2>', \$err);
	my $copy = PostgreSQL::Test::Utils::tempdir() . '/consumers';
	IPC::Run::run([ 'cp', '-a', "$FindBin::Bin/../consumers", $copy ], '2>', \$err)
	  or die "copying test/consumers: $err";
	if (!-d "$copy/node_modules") {
		my $ok = eval {
			IPC::Run::run([ 'npm', 'ci', '--no-audit', '--no-fund' ],
				'>', \$out, '2>', \$err, init => sub { chdir $copy or die $! });
		};
		my ($why) = grep { /\S/ } split /\n/, ($err // '');
		return (undef, 'npm ci failed in test/consumers: ' . ($why // $@ // 'no message'))
		  unless $ok;
	}
	$dir = $copy;
	return $dir;
}

# Each message ({binding, headers, key, body}) parsed by the CloudEvents SDK: a list of
# hashes (id, type, source, subject, time, specversion, datacontenttype, data) or {error}.
sub cloudevents {
	my (@messages) = @_;
	my $in = join '', map { encode_json($_) . "\n" } @messages;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'node', dir() . '/cloudevents_parse.js' ], '<', \$in, '>', \$out, '2>', \$err)
	  or die "cloudevents_parse.js: $err";
	return map { decode_json($_) } grep { /\S/ } split /\n/, $out;
}

1;
