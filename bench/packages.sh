#!/usr/bin/env bash
# Benchmark row for packages enforced at the proxy: a warm `pip install` of an approved
# package through the package rule (the index is a `--registry-mirror`), against the same
# install from the same pypiserver forwarded as an approved site (no package rule). Both go
# through the same gate, over plain HTTP on loopback; the target is a ratio of at most 1.5.
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

index_port=$(free_port)
python3 -m pypiserver run --disable-fallback -i 127.0.0.1 -p "$index_port" "$work/wheels" \
  >"$work/pypiserver.log" 2>&1 &
pids+=($!)
proxy_port=$(free_port)
control_port=$(free_port)
EGRESSGATE_ADMIN_TOKEN=bench-admin-token-0123456789 \
EGRESSGATE_RUNTIME_TOKEN=bench-runtime-token-0123456789 \
  "$bin" serve --data-dir "$work/data" \
  --proxy-listen "127.0.0.1:$proxy_port" --control-listen "127.0.0.1:$control_port" \
  --resolve pypi.test=127.0.0.1 --resolve plain.test=127.0.0.1 \
  --allow-cidr 127.0.0.1/32 --allow-port "$index_port" \
  --registry-mirror pypi=pypi.test --log-allowed none >"$work/gate.log" 2>&1 &
pids+=($!)
wait_port "$index_port"
wait_port "$proxy_port"
wait_port "$control_port"

api() { curl -sf -H "authorization: Bearer $1" -H 'content-type: application/json' \
  -d "$3" "http://127.0.0.1:$control_port$2"; }
api bench-admin-token-0123456789 /v1/admin/packages '{"name": "benchpkg"}' >/dev/null
proxy_url=$(api bench-runtime-token-0123456789 /v1/turns \
  '{"user_id": "bench", "chat_id": "bench", "can_ask_human": false, "sites": ["plain.test"]}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["proxy_url"])')

install() {
  local host=$1 target
  target=$(mktemp -d "$work/site.XXXXXX")
  env -i PATH="$PATH" HOME="$work" http_proxy="$proxy_url" https_proxy="$proxy_url" \
    PIP_CONFIG_FILE=/dev/null python3 -m pip install -q --no-cache-dir \
    --disable-pip-version-check --root-user-action ignore --no-input --index-url "http://$host:$index_port/simple/" \
    --trusted-host "$host" --target "$target" benchpkg
  rm -rf "$target"
}
median_ms() {
  local host=$1 times=()
  install "$host" # warm: the turn's caches, the index's file list
  for _ in $(seq 1 "$runs"); do
    local t0 t1
    t0=$(date +%s%N); install "$host"; t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (runs + 1) / 2 ))p"
}
plain=$(median_ms plain.test)
rule=$(median_ms pypi.test)
ratio=$(python3 -c "print(f'{$rule / $plain:.2f}')")
verdict=$(python3 -c "print('ok' if $rule <= 1.5 * $plain else 'OVER 1.5x')")
mkdir -p bench/results
{
  echo "# Packages: warm pip install through the package rule"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, binary \`$bin\`, median of $runs warm installs"
  echo "of one approved 4 MiB wheel from pypiserver on loopback, plain HTTP through the gate."
  echo
  echo "| path | median ms | ratio |"
  echo "|---|---|---|"
  echo "| index host forwarded as an approved site (no package rule) | $plain | 1.00 |"
  echo "| index host as a registry mirror (each request judged by package) | $rule | $ratio ($verdict) |"
} >bench/results/packages.md
cat bench/results/packages.md
[ "$verdict" = ok ]
