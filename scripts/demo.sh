#!/usr/bin/env bash
# make demo: a local 3-node Cairn cluster on loopback, a volume over NBD,
# data written and read back through a real NBD client.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE=${CAIRN_DEMO_STATE:-$ROOT/demo-state}
out=$("$ROOT/tests/lib/cluster.sh" start "$STATE" | tee /dev/stderr)
uri=$(echo "$out" | grep '^nbd://' | tail -1)
[ -n "$uri" ] || { echo "demo: the cluster printed no NBD URI; see $STATE/logs/" >&2; exit 1; }

# A client config that cairnctl finds without flags.
cfg=${CAIRNCTL_CONFIG:-$HOME/.config/cairn/cairnctl.json}
mkdir -p "$(dirname "$cfg")"
cp "$STATE/cairnctl.json" "$cfg"
chmod 600 "$cfg"

echo
echo "== writing 16 MiB of random data through NBD and reading it back"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c 16M /dev/urandom >"$tmp/in"
nbdcopy "$tmp/in" "$uri"
{ nbdcopy "$uri" - 2>/dev/null || true; } | head -c 16M >"$tmp/out" # nbdcopy ends on SIGPIPE
if cmp -s "$tmp/in" "$tmp/out"; then echo "   read back identical: OK"; else echo "demo: data read back differs!" >&2; exit 1; fi
nbdinfo "$uri" | grep -E 'export-size|can_multi_conn|can_trim' | sed 's/^/   /'

cat <<INFO

Cairn is running (state, logs and data in $STATE).
  the volume over NBD:
$uri
  inspect:     nbdinfo $uri
  use it:      qemu-img info $uri   |   fio --ioengine=nbd --uri=$uri ...
  manage:      appliance/bin/cairnctl volume ls     (config: $cfg)
               appliance/bin/cairnctl system info
  admin password: $STATE/gateway/admin-password
  stop:        make demo-stop      (make demo again resumes with the same data)
INFO
