# The Kafka mock cluster (test/tools/outbox_kafka_mock) for TAP tests: start it, send it
# fault commands, read topics back with kcat.
package KafkaMock;

use strict;
use warnings;
use FindBin;
use IPC::Run;
use Test::More;

# Where `make test-tools` builds the tool, next to test/t (whatever the current directory).
sub binary { return $ENV{OUTBOX_KAFKA_MOCK} // "$FindBin::Bin/../tools/outbox_kafka_mock"; }

sub start {
	my ($class, $brokers) = @_;
	my $self = bless { in => '', out => '' }, $class;
	$self->{run} = IPC::Run::start([ binary(), $brokers // 3 ],
		'<', \$self->{in}, '>', \$self->{out}, '2>', '/dev/null', IPC::Run::timeout(900));
	$self->{run}->pump until $self->{out} =~ /\n/;
	($self->{bootstrap}) = $self->{out} =~ /^(\S+)\n/;
	$self->{out} = '';
	return $self;
}

sub bootstrap { return $_[0]->{bootstrap}; }

# Sends one command and checks that the mock answered ok.
sub command {
	my ($self, $command) = @_;
	$self->{in} .= "$command\n";
	$self->{run}->pump until $self->{out} =~ /\n/;
	my $answer = $self->{out};
	$self->{out} = '';
	chomp $answer;
	is($answer, 'ok', "mock: $command");
}

# Every message of a topic, formatted by kcat's -f format ('': kcat's JSON envelope, -J).
sub consume {
	my ($self, $topic, $format) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[ 'kcat', '-b', $self->{bootstrap}, '-C', '-t', $topic, '-o', 'beginning', '-e', '-q',
		  length($format) ? ('-f', $format) : ('-J') ],
		'>', \$out, '2>', \$err, IPC::Run::timeout(60));
	return grep { length } split /\n/, $out;
}

# The value of header $name in kcat's %h (name=value,name=value), or undef.
sub header {
	my ($headers, $name) = @_;
	for my $kv (split /,/, $headers) {
		my ($k, $v) = split /=/, $kv, 2;
		return $v if $k eq $name;
	}
	return undef;
}

sub stop {
	my ($self) = @_;
	$self->{in} .= "quit\n";
	$self->{run}->finish;
}

1;
