# Apache httpd as a forward proxy for bench/run.sh (sourced, not run): Debian's apache2 binary
# with mod_proxy, mod_proxy_http and mod_proxy_connect under the event MPM, run in the
# foreground from a config written under the run's work directory (never the system's
# /etc/apache2 or its service). Its settings, at their best by default (bench/sweep.sh varies
# them; bench/README.md says why each is what it is):
#   AP_SERVERS (2)        child processes (StartServers = ServerLimit): one per core
#   AP_THREADS (320)      threads per child (ThreadsPerChild = ThreadLimit); a CONNECT tunnel
#                         holds a worker thread for its whole life, so the workers must cover
#                         the idle tunnels of workload 7 (500) and the clients (32) at once
#   AP_KEEPALIVE (On)     client keep-alive (MaxKeepAliveRequests unlimited, 60 s timeout)
#   AP_ACCESS_LOG (none)  `file` writes one access-log line per request (common format)
#   AP_POOL (on)          `on` declares the origin as a proxy worker (ProxySet), so forwarded
#                         requests reuse kept-alive origin connections; `off` leaves them to
#                         mod_proxy's default forward worker
# shellcheck shell=bash

AP_SERVERS=${AP_SERVERS:-2}
AP_THREADS=${AP_THREADS:-320}
AP_KEEPALIVE=${AP_KEEPALIVE:-On}
AP_ACCESS_LOG=${AP_ACCESS_LOG:-none}
AP_POOL=${AP_POOL:-on}
APACHE=/usr/sbin/apache2
APACHE_MODULES=/usr/lib/apache2/modules

# Writes DIR/httpd.conf: a forward proxy on 127.0.0.1:PORT that may CONNECT to the origin's
# two ports only and serves loopback clients only; HOST is how requests name the origin (its
# address, or the benchmark host with PEER_BY=name), for the pooled worker.
apache_conf() { # dir, port, origin port, TLS origin port, host
    local dir=$1 port=$2 origin_port=$3 tls_port=$4 host=$5 workers=$((AP_SERVERS * AP_THREADS))
    local m
    {
        cat <<EOF
ServerRoot "$dir"
ServerName egressgate-bench
Listen 127.0.0.1:$port
PidFile "$dir/httpd.pid"
DefaultRuntimeDir "$dir"
Mutex file:$dir default
ErrorLog "$dir/error.log"
LogLevel warn
User www-data
Group www-data
EOF
        for m in mpm_event authz_core authz_host proxy proxy_http proxy_connect; do
            printf 'LoadModule %s_module %s/mod_%s.so\n' "$m" "$APACHE_MODULES" "$m"
        done
        cat <<EOF
StartServers $AP_SERVERS
ServerLimit $AP_SERVERS
ThreadLimit $AP_THREADS
ThreadsPerChild $AP_THREADS
MaxRequestWorkers $workers
MinSpareThreads $AP_THREADS
MaxSpareThreads $((workers + AP_THREADS))
MaxConnectionsPerChild 0
ListenBacklog 4096
KeepAlive $AP_KEEPALIVE
MaxKeepAliveRequests 0
KeepAliveTimeout 60
Timeout 600
ProxyTimeout 600
ProxyRequests On
ProxyVia Off
AllowCONNECT $origin_port $tls_port
<Proxy "*">
    Require ip 127.0.0.1
</Proxy>
EOF
        if [ "$AP_POOL" = on ]; then
            printf '<Proxy "http://%s:%s">\n    ProxySet keepalive=On ttl=600\n</Proxy>\n' "$host" "$origin_port"
        fi
        if [ "$AP_ACCESS_LOG" != none ]; then
            printf 'LogFormat "%%h %%l %%u %%t \\"%%r\\" %%>s %%b" common\n'
            printf 'CustomLog "%s/access.log" common\n' "$dir"
        fi
    } >"$dir/httpd.conf"
}
