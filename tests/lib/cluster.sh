#!/usr/bin/env bash
# A local Cairn cluster on loopback, from the built binaries: 3 MDM members
# (embedded etcd), N SDSs with file-backed devices, a gateway, an NBD server
# for the host "local", one volume mapped to it. Used by `make demo`, the
# integration tests and the benchmarks.
#
#   cluster.sh start STATEDIR [--sds N] [--devices-per-sds M] [--device-size SIZE]
#                             [--volume-size SIZE] [--volume NAME] [--fault-sets]
#   cluster.sh stop STATEDIR      stop every daemon it started (by pid)
#   cluster.sh status STATEDIR
#
# start prints the NBD export's URI on a line of its own starting with
# nbd:// (nbds:// with CAIRN_NBD_TLS=require). Run again on an existing STATEDIR it resumes the cluster (same
# ports, same data). Everything lives in STATEDIR: logs/, pids/, data,
# cairnctl.json (export CAIRNCTL_CONFIG=STATEDIR/cairnctl.json to use it),
# pki/ (the cluster CA in pki/ca, each daemon's certificate in pki/NAME).
# --fault-sets puts each SDS in a fault set of its own (fs1 holds sds1, ...)
# when the cluster is first configured.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=common.sh
. "$ROOT/tests/lib/common.sh"
BIN=${CAIRN_BIN:-$ROOT/appliance/bin}
CAIRN=$BIN/cairn
CTL=$BIN/cairnctl

die() { echo "cluster.sh: $*" >&2; exit 1; }
say() { echo "[$(date +%H:%M:%S)] $*"; }

ctl() { CAIRNCTL_CONFIG=$STATE/cairnctl.json "$CTL" "$@"; }

cmd=${1:-}; STATE=${2:-}
[ -n "$cmd" ] && [ -n "$STATE" ] || die "usage: cluster.sh start|stop|status STATEDIR [options]"
shift 2
mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd)

stop_all() { stop_pidfiles 10 "$STATE"/pids/*.pid; }

case $cmd in
stop)
	stop_all
	say "cluster in $STATE stopped"
	exit 0
	;;
status)
	pidfile_status "$STATE"
	exit 0
	;;
start) ;;
*) die "unknown command $cmd (start, stop, status)" ;;
esac

SDS_COUNT=3 DEVS=2 DEV_SIZE=16G VOL_SIZE=8GiB VOL=vol1 FAULT_SETS=0
while [ $# -gt 0 ]; do
	case $1 in
	--sds) SDS_COUNT=$2; shift 2 ;;
	--devices-per-sds) DEVS=$2; shift 2 ;;
	--device-size) DEV_SIZE=$2; shift 2 ;;
	--volume-size) VOL_SIZE=$2; shift 2 ;;
	--volume) VOL=$2; shift 2 ;;
	--fault-sets) FAULT_SETS=1; shift ;;
	*) die "unknown option $1" ;;
	esac
done
[ -x "$CAIRN" ] && [ -x "$CTL" ] || die "binaries missing in $BIN: run 'make build' first"
mkdir -p "$STATE/logs" "$STATE/pids" "$STATE/devices"

# Ports: chosen once, kept for resumes.
if [ ! -f "$STATE/ports.env" ]; then
	# All at once: separate free_port calls may return the same port twice.
	mapfile -t ports < <(free_ports $((8 + SDS_COUNT)))
	{
		for i in 1 2 3; do echo "MDM${i}_CLIENT=${ports[2 * i - 2]}"; echo "MDM${i}_PEER=${ports[2 * i - 1]}"; done
		for ((i = 1; i <= SDS_COUNT; i++)); do echo "SDS${i}_PORT=${ports[7 + i]}"; done
		echo "GW_PORT=${ports[6]}"
		echo "NBD_PORT=${ports[7]}"
		echo "SDS_COUNT=$SDS_COUNT"
		echo "DEVS=$DEVS"
	} >"$STATE/ports.env"
fi
# shellcheck disable=SC1091
source "$STATE/ports.env"
# The MDMs serve https (their --pki certificate) and admit only clients and
# peers with a certificate of the cluster CA; each daemon's role is its etcd
# user (see appliance/internal/mdm/rbac.go).
MDM=https://127.0.0.1:$MDM1_CLIENT,https://127.0.0.1:$MDM2_CLIENT,https://127.0.0.1:$MDM3_CLIENT
export CAIRN_MDM=$MDM
INITIAL=mdm1=https://127.0.0.1:$MDM1_PEER,mdm2=https://127.0.0.1:$MDM2_PEER,mdm3=https://127.0.0.1:$MDM3_PEER

# The names the MDMs' certificates are valid for: loopback, and 10.0.2.100,
# where the LIO suites' qemu guests reach MDM 1 (tests/lio/cairn-cluster.sh).
MDM_HOSTS=127.0.0.1,localhost,10.0.2.100

t0=$(date +%s)
say "starting 3 MDM members (embedded etcd)"
for i in 1 2 3; do
	c=MDM${i}_CLIENT p=MDM${i}_PEER
	spawn "$STATE" mdm$i "$CAIRN" mdm --name mdm$i --data-dir "$STATE/mdm$i" --pki "$(pki_dir "$STATE" mdm mdm$i "$MDM_HOSTS")" \
		--client-url "https://127.0.0.1:${!c}" --peer-url "https://127.0.0.1:${!p}" --initial-cluster "$INITIAL"
done
for i in 1 2 3; do c=MDM${i}_CLIENT; wait_port --log "$STATE/logs/" 127.0.0.1 "${!c}" 30 mdm$i; done

say "starting the gateway"
spawn "$STATE" gateway "$CAIRN" gateway --pki "$(pki_dir "$STATE" gateway gateway)" --listen "127.0.0.1:$GW_PORT" --state-dir "$STATE/gateway"
wait_port --log "$STATE/logs/" 127.0.0.1 "$GW_PORT" 30 gateway

if [ ! -f "$STATE/cairnctl.json" ]; then
	for ((i = 0; i < 100; i++)); do [ -s "$STATE/gateway/admin-password" ] && break; sleep 0.1; done
	[ -s "$STATE/gateway/admin-password" ] || die "the gateway wrote no admin password (see $STATE/logs/gateway.log)"
	ctl login --url "https://127.0.0.1:$GW_PORT" --ca-file "$STATE/gateway/cert.pem" --user admin \
		--password-file "$STATE/gateway/admin-password" >/dev/null
fi

# NBD for the host "local". CAIRN_NBD_TLS=require: TLS only, the URI is
# nbds://...?tls-certificates=DIR with the host's certificate (DIR also holds
# the GnuTLS names qemu and libnbd look for). Otherwise plain NBD on loopback,
# explicitly allowed: fio's nbd engine (the benchmarks, the QoS suite) cannot
# load a client certificate from a URI (see docs/operate.md).
HOST_PKI=$(pki_dir "$STATE" host local)
ln -sf ca.crt "$HOST_PKI/ca-cert.pem" && ln -sf node.crt "$HOST_PKI/client-cert.pem" && ln -sf node.key "$HOST_PKI/client-key.pem"
if [ "${CAIRN_NBD_TLS:-off}" = require ]; then
	NBD_TLS=(--tls require) NBD_URI="nbds://127.0.0.1:$NBD_PORT/$VOL?tls-certificates=$HOST_PKI"
else
	NBD_TLS=(--tls off --allow-plain-loopback) NBD_URI="nbd://127.0.0.1:$NBD_PORT/$VOL"
fi
NBD_ARGS=(nbd --pki "$(pki_dir "$STATE" nbd nbd-local)" --host local --listen "127.0.0.1:$NBD_PORT" "${NBD_TLS[@]}")
# CAIRN_COLOCATE=1: the NBD server runs in sds1's process (cairn colocate), so
# its requests for the chunks sds1 is primary of take no network hop.
for ((i = 1; i <= SDS_COUNT; i++)); do
	p=SDS${i}_PORT
	SDS_ARGS=(sds --name "sds$i" --pki "$(pki_dir "$STATE" sds "sds$i")" --listen "127.0.0.1:${!p}" --state-dir "$STATE/sds$i")
	if [ "$i" = 1 ] && [ "${CAIRN_COLOCATE:-0}" = 1 ]; then
		spawn "$STATE" sds$i "$CAIRN" colocate "${SDS_ARGS[@]}" -- "${NBD_ARGS[@]}"
	else
		spawn "$STATE" sds$i "$CAIRN" "${SDS_ARGS[@]}"
	fi
done

if [ ! -f "$STATE/.configured" ]; then
	say "configuring: protection domain, pool, $SDS_COUNT SDSs x $DEVS devices, volume $VOL"
	ctl system bootstrap --name cairn-local >/dev/null 2>&1 || true # refused once done
	ctl pd info pd1 >/dev/null 2>&1 || ctl pd create pd1 >/dev/null
	ctl pool info pool1 >/dev/null 2>&1 || ctl pool create pool1 --pd pd1 >/dev/null
	for ((i = 1; i <= SDS_COUNT; i++)); do
		p=SDS${i}_PORT fs=()
		if [ "$FAULT_SETS" = 1 ]; then
			ctl faultset info "fs$i" >/dev/null 2>&1 || ctl faultset create "fs$i" --pd pd1 >/dev/null
			fs=(--fault-set "fs$i")
		fi
		ctl sds info "sds$i" >/dev/null 2>&1 || ctl sds create "sds$i" --pd pd1 "${fs[@]}" --address "127.0.0.1:${!p}" >/dev/null
	done
	for ((i = 1; i <= SDS_COUNT; i++)); do p=SDS${i}_PORT; wait_port --log "$STATE/logs/" 127.0.0.1 "${!p}" 30 "sds$i"; done
	for ((i = 1; i <= SDS_COUNT; i++)); do
		for ((d = 1; d <= DEVS; d++)); do
			f=$STATE/devices/sds$i-dev$d.img
			[ -f "$f" ] || truncate -s "$DEV_SIZE" "$f"
			ctl device info "sds$i-dev$d" >/dev/null 2>&1 ||
				ctl device create "sds$i-dev$d" --sds "sds$i" --pool pool1 --path "$f" >/dev/null
		done
	done
	ctl host info local >/dev/null 2>&1 || ctl host create local --type nbd >/dev/null
	ctl volume info "$VOL" >/dev/null 2>&1 || ctl volume create "$VOL" --pool pool1 --size "$VOL_SIZE" >/dev/null
	ctl volume map "$VOL" --host local >/dev/null 2>&1 || true
	touch "$STATE/.configured"
else
	for ((i = 1; i <= SDS_COUNT; i++)); do p=SDS${i}_PORT; wait_port --log "$STATE/logs/" 127.0.0.1 "${!p}" 30 "sds$i"; done
fi

[ "${CAIRN_COLOCATE:-0}" = 1 ] || spawn "$STATE" nbd "$CAIRN" "${NBD_ARGS[@]}"
wait_port --log "$STATE/logs/" 127.0.0.1 "$NBD_PORT" 30 nbd
say "cluster up in $(($(date +%s) - t0)) s"
echo "$NBD_URI"
