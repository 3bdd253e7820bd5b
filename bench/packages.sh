#!/usr/bin/env bash
# Benchmark rows for packages enforced at the proxy: a warm `pip install` of an approved
# package through the package rule (the index is a `--registry-mirror`), against the same
# install from the same pypiserver with the host approved as a site (no package rule). Twice:
# over plain HTTP (forwarded both ways), and over HTTPS through a TLS front, where the
# registry host is inspected (TLS ended with the deployment CA, each request judged) and the
# site is an opaque tunnel. All through the same gate on loopback; the target is a ratio of at
# most 1.5 for the HTTPS pair (the issue's "against an opaque tunnel").
# Writes bench/results/packages.md. Needs python3 with pip and pypiserver.
#
#   bash bench/packages.sh                      # builds the release binary first
#   EGRESSGATE_BIN=path/to/egressgate bash bench/packages.sh
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-7}
bin=${EGRESSGATE_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release -q
  bin="${CARGO_TARGET_DIR:-target}/release/egressgate"
fi
python3 -m pypiserver --version >/dev/null

work=$(mktemp -d /tmp/egressgate-bench-packages.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }

# One pure-Python wheel with a 4 MiB payload, so the install moves real bytes.
mkdir -p "$work/wheels"
python3 - "$work/wheels" <<'PY'
import os, sys, zipfile
d = sys.argv[1]
info = "benchpkg-1.0.dist-info"
files = {
    "benchpkg/__init__.py": "",
    "benchpkg/blob.bin": os.urandom(4 * 1024 * 1024),
    f"{info}/METADATA": "Metadata-Version: 2.1\nName: benchpkg\nVersion: 1.0\n",
    f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
with zipfile.ZipFile(f"{d}/benchpkg-1.0-py3-none-any.whl", "w", zipfile.ZIP_STORED) as z:
    for p, data in files.items():
        z.writestr(p, data)
    z.writestr(f"{info}/RECORD", "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n")
PY

# A CA and a leaf for both names, for the TLS front in front of pypiserver.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=bench-ca \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
  -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=pypi.test -keyout "$work/front.key" \
  -out "$work/front.csr" 2>/dev/null
printf 'subjectAltName=DNS:pypi.test,DNS:plain.test\nbasicConstraints=CA:FALSE\n' >"$work/ext"
openssl x509 -req -in "$work/front.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
  -CAcreateserial -days 1 -extfile "$work/ext" -out "$work/front.pem" 2>/dev/null

index_port=$(free_port)
front_port=$(free_port)
python3 -m pypiserver run --disable-fallback -i 127.0.0.1 -p "$index_port" "$work/wheels" \
  >"$work/pypiserver.log" 2>&1 &
pids+=($!)
python3 - "$front_port" "$index_port" "$work/front.pem" "$work/front.key" <<'PY' &
import asyncio, ssl, sys
port, backend, cert, key = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
ctx.load_cert_chain(cert, key)
async def pipe(r, w):
    try:
        while data := await r.read(65536):
            w.write(data)
            await w.drain()
    finally:
        w.close()
async def handle(cr, cw):
    ur, uw = await asyncio.open_connection("127.0.0.1", backend)
    await asyncio.gather(pipe(cr, uw), pipe(ur, cw), return_exceptions=True)
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", port, ssl=ctx)
    async with server:
        await server.serve_forever()
asyncio.run(main())
PY
pids+=($!)
proxy_port=$(free_port)
control_port=$(free_port)
EGRESSGATE_ADMIN_TOKEN=bench-admin-token-0123456789 \
EGRESSGATE_RUNTIME_TOKEN=bench-runtime-token-0123456789 \
  "$bin" serve --data-dir "$work/data" \
  --proxy-listen "127.0.0.1:$proxy_port" --control-listen "127.0.0.1:$control_port" \
  --resolve pypi.test=127.0.0.1 --resolve plain.test=127.0.0.1 \
  --allow-cidr 127.0.0.1/32 --allow-port "$index_port,$front_port" \
  --upstream-ca "$work/ca.pem" \
  --registry-mirror pypi=pypi.test --log-allowed none >"$work/gate.log" 2>&1 &
pids+=($!)
wait_port "$index_port"
wait_port "$front_port"
wait_port "$proxy_port"
wait_port "$control_port"
curl -sf "http://127.0.0.1:$control_port/v1/ca.pem" >"$work/deployment-ca.pem"

api() { curl -sf -H "authorization: Bearer $1" -H 'content-type: application/json' \
  -d "$3" "http://127.0.0.1:$control_port$2"; }
api bench-admin-token-0123456789 /v1/admin/packages '{"name": "benchpkg"}' >/dev/null
proxy_url=$(api bench-runtime-token-0123456789 /v1/turns \
  '{"user_id": "bench", "chat_id": "bench", "can_ask_human": false, "sites": ["plain.test"]}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["proxy_url"])')

# install HOST SCHEME PORT TRUST: one pip install of benchpkg from SCHEME://HOST:PORT through
# the gate, trusting TRUST (a CA file) for HTTPS.
install() {
  local host=$1 scheme=$2 port=$3 trust=$4 target
  target=$(mktemp -d "$work/site.XXXXXX")
  local tls=(--trusted-host "$host")
  [ "$scheme" = https ] && tls=(--cert "$trust")
  env -i PATH="$PATH" HOME="$work" http_proxy="$proxy_url" https_proxy="$proxy_url" \
    PIP_CONFIG_FILE=/dev/null python3 -m pip install -q --no-cache-dir \
    --disable-pip-version-check --root-user-action ignore --no-input \
    --index-url "$scheme://$host:$port/simple/" "${tls[@]}" --target "$target" benchpkg
  rm -rf "$target"
}
median_ms() {
  local times=()
  install "$@" # warm: the turn's caches, the index's file list, the minted leaf
  for _ in $(seq 1 "$runs"); do
    local t0 t1
    t0=$(date +%s%N); install "$@"; t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (runs + 1) / 2 ))p"
}
plain=$(median_ms plain.test http "$index_port" -)
rule=$(median_ms pypi.test http "$index_port" -)
tunnel=$(median_ms plain.test https "$front_port" "$work/ca.pem")
inspected=$(median_ms pypi.test https "$front_port" "$work/deployment-ca.pem")
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
verdict=$(python3 -c "print('ok' if $inspected <= 1.5 * $tunnel else 'OVER 1.5x')")
mkdir -p bench/results
{
  echo "# Packages: warm pip install through the package rule"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, binary \`$bin\`, median of $runs warm installs"
  echo "of one approved 4 MiB wheel from pypiserver on loopback through the gate (HTTPS rows: a"
  echo "Python TLS front before pypiserver, the same for both rows)."
  echo
  echo "| path | median ms | ratio |"
  echo "|---|---|---|"
  echo "| HTTP: index host forwarded as an approved site (no package rule) | $plain | 1.00 |"
  echo "| HTTP: index host as a registry mirror (each request judged by package) | $rule | $(ratio "$rule" "$plain") |"
  echo "| HTTPS: index host approved as a site, an opaque tunnel | $tunnel | 1.00 |"
  echo "| HTTPS: registry mirror, inspected, each request judged by package | $inspected | $(ratio "$inspected" "$tunnel") ($verdict) |"
} >bench/results/packages.md
cat bench/results/packages.md
[ "$verdict" = ok ]
