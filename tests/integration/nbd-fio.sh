#!/usr/bin/env bash
# Integration: a 3-node cluster from the built binaries with its NBD server in
# TLS-only mode (CAIRN_NBD_TLS=require). Clients without the right certificate
# are refused; libnbd (nbdinfo, nbdcopy) and qemu (qemu-io, qemu-nbd) connect
# with the host's certificate; fio (nbd engine) random writes with crc32c
# verification from several jobs, a full restart of every daemon and a
# verify-only pass over the same data, and a trim; then the whole cluster
# restarted with the NBD server in sds1's process (cairn colocate): the same
# data, no connection from that process to its own SDS, and new writes.
#
# fio's nbd engine (fio 3.33 with libnbd 1.14) refuses tls-certificates in a
# URI ("local file access is not allowed"), so fio reaches the TLS server
# through qemu-nbd: a TLS client of `cairn nbd` that serves fio on a unix
# socket of this test.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../lib/common.sh
. "$ROOT/tests/lib/common.sh"
# shellcheck disable=SC2034 # pki_dir (common.sh) runs $CAIRN
CAIRN=${CAIRN_BIN:-$ROOT/appliance/bin}/cairn
STATE=$(mktemp -d /tmp/cairn-it.XXXXXX)
T0=$(date +%s)
BRIDGE_PID=
stop_bridge() {
	if [ -n "$BRIDGE_PID" ]; then
		kill "$BRIDGE_PID" 2>/dev/null || true
		wait "$BRIDGE_PID" 2>/dev/null || true
		BRIDGE_PID=
	fi
}
cleanup() {
	stop_bridge
	"$ROOT/tests/lib/cluster.sh" stop "$STATE" >/dev/null 2>&1 || true
	if [ "${KEEP_STATE:-0}" = 1 ]; then echo "state kept in $STATE"; else rm -rf "$STATE"; fi
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	tail -n 20 "$STATE"/logs/*.log || true
	exit 1
}
pass=0
ok() { echo "ok: $*"; pass=$((pass + 1)); }

export CAIRN_NBD_TLS=require
uri=$("$ROOT/tests/lib/cluster.sh" start "$STATE" --volume-size 2GiB | grep '^nbds://') || fail "no nbds:// URI from cluster.sh"
hostport=${uri#nbds://} hostport=${hostport%%/*}
vol=${uri#nbds://*/} vol=${vol%%\?*}
certs=${uri#*tls-certificates=}
port=${hostport##*:}

# gnutls_dir ROLE NAME: a certificate of this cluster under the names GnuTLS
# clients (qemu, libnbd) look for.
gnutls_dir() {
	local d
	d=$(pki_dir "$STATE" "$1" "$2") || return 1
	ln -sf ca.crt "$d/ca-cert.pem" && ln -sf node.crt "$d/client-cert.pem" && ln -sf node.key "$d/client-key.pem"
	echo "$d"
}

# 1. clients without the right certificate get nothing
if out=$(timeout 20 nbdinfo --list "nbd://$hostport" 2>&1); then fail "a plain client listed the exports: $out"; fi
case $out in *"$vol"*) fail "a plain client was told the export's name: $out" ;; esac
if out=$(timeout 20 nbdinfo "nbd://$hostport/$vol" 2>&1); then fail "a plain client opened $vol: $out"; fi
case $out in *TLS*) ;; *) fail "the refusal of a plain client does not say TLS is required: $out" ;; esac
for who in "sds sds-rogue" "host other-host" "client tool"; do
	# shellcheck disable=SC2086
	d=$(gnutls_dir $who) || fail "issue a $who certificate"
	if out=$(timeout 20 nbdinfo "nbds://$hostport/$vol?tls-certificates=$d" 2>&1); then fail "a client with a '$who' certificate opened $vol"; fi
done
refused=$(grep -c "nbd: client refused" "$STATE/logs/nbd.log" || true)
[ "$refused" -ge 5 ] || fail "$refused refusals in the NBD server's log, want one per attempt (5)"
ok "plain NBD, and certificates of role sds, client or another host, are refused and logged"

# 2. libnbd over TLS with the host's certificate: the export and only it
info=$(timeout 20 nbdinfo "$uri") || fail "nbdinfo over TLS"
case $info in *"with TLS"*"export-size: 2147483648"*) ;; *) fail "nbdinfo over TLS: $info" ;; esac
names=$(timeout 20 nbdinfo --list --json "nbds://$hostport?tls-certificates=$certs" | jq -r '.exports[]."export-name"') || fail "nbdinfo --list over TLS"
[ "$names" = "$vol" ] || fail "exports listed over TLS: '$names', want only '$vol'"
ok "libnbd (nbdinfo) over TLS sees the host's export, 2 GiB, and nothing else"

# 3. qemu over TLS (qemu-io through its nbd driver): write a pattern, read it back
qemu_tls=(--object "tls-creds-x509,id=tls0,dir=$certs,endpoint=client" --image-opts)
qemu_img="driver=nbd,host=127.0.0.1,port=$port,export=$vol,tls-creds=tls0"
out=$(timeout 60 qemu-io "${qemu_tls[@]}" "$qemu_img" -c 'write -P 0xa5 1536M 8M' -c 'read -P 0xa5 1536M 8M' 2>&1) ||
	fail "qemu-io over TLS: $out"
case $out in *"Pattern verification failed"* | *"failed"*) fail "qemu-io over TLS: $out" ;; esac
ok "qemu-io over TLS writes 8 MiB and reads the same pattern back"

# fio reaches the TLS server through qemu-nbd (see the header).
sock=$STATE/fio-bridge.sock
start_bridge() {
	rm -f "$sock"
	qemu-nbd "${qemu_tls[@]}" "$qemu_img,cache.direct=on" --persistent --shared=8 --discard=unmap -x "$vol" \
		--socket="$sock" >>"$STATE/logs/qemu-nbd.log" 2>&1 </dev/null &
	BRIDGE_PID=$!
	wait_for 30 test -S "$sock" || fail "qemu-nbd (the TLS client fio goes through) did not start; see $STATE/logs/qemu-nbd.log"
}
start_bridge
fio_uri="nbd+unix:///$vol?socket=$sock"

fiojob() { # extra fio args...
	fio --name=it --ioengine=nbd --uri="$fio_uri" --rw=randwrite --bs=4k --iodepth=16 --numjobs=2 \
		--size=128m --offset_increment=256m --verify=crc32c --verify_fatal=1 --randrepeat=1 \
		--group_reporting --output-format=terse "$@"
}

# 4. random writes then verified reads, two jobs in disjoint regions
if ! out=$(fiojob --do_verify=1 2>&1); then echo "$out"; fail "fio write+verify"; fi
ok "fio randwrite+verify crc32c over TLS, 2 jobs x 128 MiB at qd16"

# 5. a mixed-size pattern written, every daemon restarted, verified
if ! out=$(fiojob --bs=4k,64k --rw=randwrite --offset=1g --do_verify=0 2>&1); then echo "$out"; fail "fio write before restart"; fi
stop_bridge
"$ROOT/tests/lib/cluster.sh" stop "$STATE" >/dev/null
"$ROOT/tests/lib/cluster.sh" start "$STATE" >/dev/null || fail "restart"
start_bridge
if ! out=$(fiojob --bs=4k,64k --rw=randwrite --offset=1g --verify_only 2>&1); then echo "$out"; fail "verify after restart"; fi
ok "data survives a stop and restart of every daemon (fio verify_only over TLS)"

# 6. discard reads back zeros (nbdcopy over TLS directly)
tmp=$STATE/tmp && mkdir -p "$tmp"
head -c 4M /dev/urandom >"$tmp/r"
nbdcopy "$tmp/r" "$uri" || fail "nbdcopy to the export over TLS"
{ nbdcopy "$uri" - 2>/dev/null || true; } | head -c 4M >"$tmp/back" # nbdcopy ends on SIGPIPE
cmp -s "$tmp/back" "$tmp/r" || fail "nbdcopy over TLS does not read back what it wrote"
fio --name=trim --ioengine=nbd --uri="$fio_uri" --rw=trim --bs=1m --size=4m --output-format=terse >/dev/null
{ nbdcopy "$uri" - 2>/dev/null || true; } | head -c 4M >"$tmp/back"
cmp -s "$tmp/back" <(head -c 4M /dev/zero) || fail "trimmed range does not read back as zeros"
ok "nbdcopy over TLS reads back what it wrote; trim reads back zeros"

# 7. colocated: the cluster restarted with the NBD server inside sds1's
# process (CAIRN_COLOCATE=1, cairn colocate sds ... -- nbd ...). The data
# written above reads back; sds1 serves the NBD server's requests without the
# network (no TCP connection from its own process to its port, while the
# other SDSs have connections from it); new writes verify.
stop_bridge
"$ROOT/tests/lib/cluster.sh" stop "$STATE" >/dev/null
CAIRN_COLOCATE=1 "$ROOT/tests/lib/cluster.sh" start "$STATE" >/dev/null || fail "restart colocated"
[ ! -e "$STATE/pids/nbd.pid" ] || fail "a separate NBD server was started with CAIRN_COLOCATE=1"
grep -q "NBD server listening" "$STATE/logs/sds1.log" || fail "the NBD server is not running in sds1's process (see $STATE/logs/sds1.log)"
start_bridge
if ! out=$(fiojob --bs=4k,64k --rw=randwrite --offset=1g --verify_only 2>&1); then echo "$out"; fail "colocated: verify of the data written before"; fi
if ! out=$(fiojob --offset=512m --do_verify=1 2>&1); then echo "$out"; fail "colocated: fio write+verify"; fi
# shellcheck disable=SC1091
source "$STATE/ports.env"
colo=$(cat "$STATE/pids/sds1.pid")
conns_to() { ss -Htnp state established "( dport = :$1 )" | grep -c "pid=$colo," || true; }
[ "$(conns_to "$SDS1_PORT")" = 0 ] || fail "sds1's process has TCP connections to its own SDS port: the colocated NBD server went through the network"
[ "$(conns_to "$SDS2_PORT")" -gt 0 ] || fail "sds1's process has no connection to sds2: the check above proves nothing"
ok "colocated (cairn colocate sds -- nbd): the data reads back, new writes verify, and sds1 is reached without the network"

echo "$pass passed, 0 failed in $(($(date +%s) - T0)) s"
