#!/usr/bin/env bash
# The Debian package as a user gets it: built with `cargo deb` (pinned) from the binary CI
# already built (the dev profile: a release build takes too long for CI; `cargo deb` alone
# builds the stripped release one), installed with dpkg, its unit verified and its exposure
# rated, the installed binary run with the shipped settings as the package's user until
# /healthz and /readyz answer, then purged, leaving no user, data or settings behind.
#
#   bash deploy/debian/check-package.sh
#
# Needs root, dpkg, systemd-analyze, runuser and curl. Under CI=true a missing tool is
# installed (apt-get, cargo install), and still missing is a failure, never a skip.
set -euo pipefail
cd "$(dirname "$0")/../.."

CARGO_DEB_VERSION=3.8.0
MAX_EXPOSURE=2.0
: "${CARGO_TARGET_DIR:=target}"
export CARGO_TARGET_DIR

fail() { echo "package check: FAILED: $*" >&2; exit 1; }
passed=0
ok() { passed=$((passed + 1)); echo "ok     $*"; }

[ "$(id -u)" = 0 ] || fail "needs root (dpkg -i, useradd)"
if ! command -v systemd-analyze >/dev/null || ! command -v curl >/dev/null; then
  [ "${CI:-}" = true ] || fail "systemd-analyze and curl are needed: apt-get install systemd curl"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd curl
fi
if [ "$(cargo deb --version 2>/dev/null | awk '{print $2}')" != "$CARGO_DEB_VERSION" ]; then
  [ "${CI:-}" = true ] || fail "cargo-deb $CARGO_DEB_VERSION is needed: cargo install --locked cargo-deb@$CARGO_DEB_VERSION"
  cargo install --locked --quiet "cargo-deb@$CARGO_DEB_VERSION"
fi
for tool in dpkg runuser systemd-analyze curl; do
  command -v "$tool" >/dev/null || fail "$tool is missing"
done
if dpkg -s egressgate >/dev/null 2>&1; then
  # Only a CI machine may lose an installed egressgate to this check.
  [ "${CI:-}" = true ] || fail "egressgate is installed on this machine; this check would purge it"
  dpkg --purge egressgate >/dev/null
fi

work=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  dpkg -s egressgate >/dev/null 2>&1 && dpkg --purge egressgate >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

cargo build --quiet -p egressgate --bin egressgate
# cargo-deb warns that the dev profile is meant for releases only; the pinned version builds it.
cargo deb --quiet -p egressgate --profile dev --no-build --fast --output "$work/" >"$work/deb.log" 2>&1 \
  || { cat "$work/deb.log" >&2; fail "cargo deb"; }
deb=$(ls "$work"/egressgate_*.deb)
ok "built $(basename "$deb") ($(du -h "$deb" | cut -f1))"

dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "dpkg -i"; }
ok "dpkg -i"
unit=$(dpkg -L egressgate | grep '/systemd/system/egressgate.service$')
getent passwd egressgate >/dev/null || fail "no user egressgate after install"
[ "$(stat -c '%U %a' /var/lib/egressgate)" = "egressgate 700" ] || fail "/var/lib/egressgate is not egressgate's, mode 700"
[ "$(stat -c '%U:%G %a' /etc/egressgate/egressgate.toml)" = "root:egressgate 640" ] || fail "the settings file is not root:egressgate 0640"
dpkg-query -W -f='${Conffiles}\n' egressgate | grep -q /etc/egressgate/egressgate.toml || fail "the settings file is not a conffile"
ok "user egressgate, its data directory 0700, settings root:egressgate 0640 as a conffile"
[ -L /etc/systemd/system/multi-user.target.wants/egressgate.service ] || fail "the unit is not enabled"
ok "the unit is enabled ($unit)"

systemd-analyze verify "$unit" || fail "systemd-analyze verify $unit"
ok "systemd-analyze verify"
systemd-analyze security --offline=true --no-pager "$unit" >"$work/security.txt" 2>&1 || true
exposure=$(sed -n 's/.*Overall exposure level for egressgate.service: \([0-9.]*\).*/\1/p' "$work/security.txt")
[ -n "$exposure" ] || { cat "$work/security.txt" >&2; fail "no exposure level"; }
echo "systemd-analyze security: exposure $exposure (at most $MAX_EXPOSURE)"
awk -v e="$exposure" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(e <= m) }' || fail "exposure $exposure > $MAX_EXPOSURE"
ok "exposure $exposure ≤ $MAX_EXPOSURE"

# No systemd as PID 1 here: the unit's command line, as its user, on free loopback ports.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
control=$(port)
proxy=$(port)
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
# shellcheck disable=SC2086 # the unit's command line, split as systemd splits it
runuser -u egressgate -- $exec_start --control-listen "127.0.0.1:$control" \
  --proxy-listen "127.0.0.1:$proxy" >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 1 100); do
  grep -q "control plane listening" "$work/serve.log" && break
  kill -0 "$server" 2>/dev/null || { cat "$work/serve.log" >&2; fail "serve exited"; }
  sleep 0.1
done
[ "$(curl -fsS "http://127.0.0.1:$control/healthz")" = ok ] || { cat "$work/serve.log" >&2; fail "/healthz"; }
[ "$(curl -fsS "http://127.0.0.1:$control/readyz")" = ready ] || fail "/readyz"
ok "the installed binary serves with the shipped settings as egressgate: /healthz ok, /readyz ready"
[ "$(stat -c '%U %a' /var/lib/egressgate/tokens)" = "egressgate 600" ] || fail "tokens file"
[ "$(stat -c '%U' /var/lib/egressgate/egressgate.db)" = egressgate ] || fail "database owner"
ok "its database and generated tokens are in /var/lib/egressgate, the tokens 0600"
# The binary is runuser's child; runuser exits with its status.
kill -TERM "$(cat "/proc/$server/task/$server/children")"
wait "$server" || { cat "$work/serve.log" >&2; fail "serve did not exit 0 on SIGTERM"; }
server=""
ok "SIGTERM: exit 0"

dpkg --purge egressgate >"$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; fail "dpkg --purge"; }
! getent passwd egressgate >/dev/null || fail "user egressgate left after purge"
! getent group egressgate >/dev/null || fail "group egressgate left after purge"
for p in /var/lib/egressgate /etc/egressgate /usr/bin/egressgate "$unit" \
         /etc/systemd/system/multi-user.target.wants/egressgate.service; do
  [ ! -e "$p" ] && [ ! -L "$p" ] || fail "$p left after purge"
done
ok "dpkg --purge: no user, group, data, settings, binary or unit left"
echo "package: $passed passed, 0 failed"
