#!/usr/bin/env bash
# Per-hop latency of one I/O at queue depth 1 (issue 18): where a 4k read
# and a mirrored 4k write spend their time, from Cairn's own counters.
#
#   tests/bench/hops.sh [RUNTIME_S]
#
# On a local cluster (tests/lib/cluster.sh: 3 SDSs, 2 copies, NBD), fio's
# nbd engine runs each job for RUNTIME_S seconds (default 15). Half-way
# through, the gateway's statistics (the last 5 s window) give the mean
# latency seen at each layer:
#   client    fio: submission to completion
#   frontend  the NBD server's counters (the host "local"; the volume's
#             figures are the same, frontends count them): request decoded
#             to reply ready
#   primary   the SDSs' counters (they count requests as primary only):
#             request read to answer, a write's including its copy's answer
#   copy      the devices' counters minus the SDSs' (devices count both
#             roles): a copy's forwarded write, read to answer
# and the differences are the hops between them. Uses the binaries in
# appliance/bin (make build) unless CAIRN_BIN is set. Heavy: run it alone
# (flock /tmp/cairn-heavy.lock on a shared machine). About a minute.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RUNTIME=${1:-15}
BIN=${CAIRN_BIN:-$REPO/appliance/bin}
die() { echo "hops.sh: $*" >&2; exit 1; }
command -v fio >/dev/null || die "fio missing (apt-get install fio)"
[ -x "$BIN/cairn" ] && [ -x "$BIN/cairnctl" ] || die "no cairn binaries in $BIN: run make build (or set CAIRN_BIN)"
[ "$RUNTIME" -ge 10 ] 2>/dev/null || die "RUNTIME_S must be a number of seconds, at least 10 (the statistics window is 5 s)"

TMP=$(mktemp -d /tmp/cairn-hops.XXXXXX)
cleanup() {
	trap '' INT TERM
	CAIRN_BIN=$BIN timeout 60 "$REPO/tests/lib/cluster.sh" stop "$TMP/state" >/dev/null 2>&1 || true
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

URI=$(CAIRN_BIN=$BIN timeout 180 "$REPO/tests/lib/cluster.sh" start "$TMP/state" --sds 3 --devices-per-sds 1 \
	--device-size 4G --volume-size 1GiB 2>"$TMP/start.err" | grep '^nbd://') ||
	die "cluster did not start: $(tail -5 "$TMP/start.err")"
ctl() { CAIRNCTL_CONFIG=$TMP/state/cairnctl.json timeout 30 "$BIN/cairnctl" "$@"; }
fio --name=fill --ioengine=nbd --uri="$URI" --size=256m --rw=write --bs=1M --iodepth=8 >/dev/null 2>&1 ||
	die "fio could not fill the volume"
# Read it back once (not measured), as the bench does (prepare in lib.sh): the
# fill's O_DIRECT writes leave the SDSs' read cache cold, and the read job
# would otherwise time the cache warming, not the path.
fio --name=warm --ioengine=nbd --uri="$URI" --size=256m --rw=read --bs=1M --iodepth=8 >/dev/null 2>&1 ||
	die "fio could not read the volume back"
names() { ctl --json "$1" ls | python3 -c 'import json, sys; [print(d["name"]) for d in json.load(sys.stdin)]'; }
mapfile -t DEVICES < <(names device)
mapfile -t SDSS < <(names sds)
[ ${#DEVICES[@]} -gt 0 ] && [ ${#SDSS[@]} -gt 0 ] || die "no devices or SDSs listed"

for rw in randread randwrite; do
	fio --name=hops --ioengine=nbd --uri="$URI" --size=256m --rw=$rw --bs=4k --iodepth=1 --norandommap=1 \
		--time_based=1 --runtime="$RUNTIME" --output-format=json >"$TMP/$rw.fio.json" 2>"$TMP/$rw.fio.err" &
	fpid=$!
	sleep $((RUNTIME / 2 + 3)) # two full 5 s windows after fio's start
	ctl --json stats show hosts local >"$TMP/$rw.host.json"
	for s in "${SDSS[@]}"; do ctl --json stats show sds "$s"; done >"$TMP/$rw.sds.json"
	for d in "${DEVICES[@]}"; do ctl --json stats show devices "$d"; done >"$TMP/$rw.dev.json"
	wait $fpid || die "fio failed: $(tail -3 "$TMP/$rw.fio.err")"
done

python3 - "$TMP" <<'EOF'
import json, sys
d = sys.argv[1]
def stats(path):
    # one JSON document per object (the device file holds several)
    dec, text, out, i = json.JSONDecoder(), open(path).read(), [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        obj, i = dec.raw_decode(text, i)
        out.append(obj)
print("| I/O (QD 1, 4 KiB) | client (fio) | frontend (NBD server) | primary SDS | copy SDS | fio ↔ NBD | NBD ↔ primary | primary − copy (the copy's round trip; the primary's own write overlaps it) |")
print("|---|--:|--:|--:|--:|--:|--:|--:|")
for rw, side in (("randread", "read"), ("randwrite", "write")):
    text = open(f"{d}/{rw}.fio.json").read()
    text = text[text.index("\n{") + 1:] if not text.startswith("{") else text  # fio may print a note first
    job = json.loads(text)["jobs"][0][side]
    client = job["lat_ns"]["mean"] / 1000
    host = stats(f"{d}/{rw}.host.json")[0][side]
    def total(objs):  # operations per second, and latency-weighted sum
        ops = sum(x["iops"] for x in objs)
        return ops, sum(x["iops"] * x["latency_mean_us"] for x in objs)
    p_ops, p_sum = total([s[side] for s in stats(f"{d}/{rw}.sds.json")])
    d_ops, d_sum = total([s[side] for s in stats(f"{d}/{rw}.dev.json")])
    fe, pr = host["latency_mean_us"], p_sum / p_ops
    cells = [f"{client:.0f} µs", f"{fe:.0f} µs", f"{pr:.0f} µs"]
    if side == "write":
        copy = (d_sum - p_sum) / (d_ops - p_ops) if d_ops > p_ops else float("nan")
        cells += [f"{copy:.0f} µs", f"{client - fe:.0f} µs", f"{fe - pr:.0f} µs", f"{pr - copy:.0f} µs"]
    else:
        cells += ["-", f"{client - fe:.0f} µs", f"{fe - pr:.0f} µs", "-"]
    print(f"| {rw} ({job['iops']:.0f} IOPS) | " + " | ".join(cells) + " |")
EOF
