# GET the URL in $ARGV[0] over a raw IO::Socket::INET connection (no proxy logic at all).
use strict;
use warnings;
use IO::Socket::INET;

my ($host, $port, $path) = $ARGV[0] =~ m{^http://([^:/]+):(\d+)(/.*)$} or die "perl: bad URL\n";
my $s = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port, Proto => 'tcp', Timeout => 20)
    or do { print STDERR "perl: connect: $@\n"; exit 3 };
print $s "GET $path HTTP/1.1\r\nHost: $host:$port\r\nConnection: close\r\n\r\n";
my $head = '';
while (my $line = <$s>) { last if $line eq "\r\n"; $head .= $line; }
if ($head !~ m{^HTTP/1\.\d 200}) { print STDERR "perl: no 200: $head\n"; exit 3 }
my ($len) = $head =~ /content-length:\s*(\d+)/i;
read($s, my $body, $len // 0);
print $body;
