#!/usr/bin/env bash
# The power button of a simulated Cairn SVM: vcsimkit.CommandHooks runs
#   svm-hook.sh start   when the SVM powers on  (prints guestinfo.* lines once it is ready)
#   svm-hook.sh stop    when it powers off
# with CAIRN_SVM_* in the environment (see vcsimkit/commandhooks.go).
#
# The SVM is a network namespace E2E_PREFIX-<octet> (created on first power-on,
# plugged into the harness's bridge in E2E_PREFIX-hub) holding the address of its
# vApp property cairn.mgmt.address on eth0 — the network vSphere gives the VM. What
# runs inside is the appliance itself: tests/e2e/svm-guest.sh installs the image with
# packer/scripts/20-cairn.sh and boots its units; first boot is the real
# `cairn firstboot`, reading the OVF environment the simulator rendered (through
# vmtoolsd's guestinfo channel, tests/e2e/guest/vmtoolsd). This hook only passes the
# OVF environment in and the guest's published guestinfo.* values out; it knows
# nothing of roles, addresses or daemons.
#
# The SVM's RDMs are files E2E_STATE/svm/<vm>/disks/<naa>.img (the e2e's
# deploy.Engine.DevicePath), created here as the disks the host would have.
#
# Fault injection: while E2E_STATE/fail-boot/<esxi host> exists, start fails (the SVM
# does not boot).
#
# Harness environment: E2E_STATE (state dir), E2E_PREFIX (namespace prefix),
# CAIRN_BIN (appliance/bin), E2E_DEVICE_SIZE (default 2G), E2E_BOOT_TIMEOUT (s, 90).
set -euo pipefail

: "${E2E_STATE:?}" "${E2E_PREFIX:?}" "${CAIRN_BIN:?}" "${CAIRN_SVM_NAME:?}" "${CAIRN_SVM_HOST:?}"
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# alive, netns_pids, mount_pids
# shellcheck source=../lib/common.sh
. "$REPO/tests/lib/common.sh"
die() { echo "svm-hook $CAIRN_SVM_NAME: $*" >&2; exit 1; }

ADDR=${CAIRN_SVM_PROP_CAIRN_MGMT_ADDRESS:?the SVM has no cairn.mgmt.address: the network is not configured}
IP=${ADDR%/*}
OCTET=${IP##*.}
NS=$E2E_PREFIX-$OCTET
HUB=$E2E_PREFIX-hub
DIR=$E2E_STATE/svm/$CAIRN_SVM_NAME
mkdir -p "$DIR/disks" "$DIR/guestinfo" "$DIR/sim" "$DIR/logs"

power_off() {
	local n pid pids
	if alive "$DIR/machine.pid"; then
		pid=$(cat "$DIR/machine.pid")
		kill -TERM "$pid" 2>/dev/null || true
		for ((n = 0; n < 200; n++)); do alive "$DIR/machine.pid" || break; sleep 0.1; done
	fi
	rm -f "$DIR/machine.pid"
	# A hard power-off for whatever is still running: every process of the SVM is
	# in its mount namespace (svm-guest.sh's overlays name $DIR/root/ there) and,
	# unless it moved, in its network namespace — however it was started: by the
	# boot, by first boot, or by the updater's `systemctl restart` in a session
	# and environment of its own. Repeat until none is left (a unit's supervisor
	# may have been restarting its daemon as we looked).
	pids=$(kill_until_gone svm_pids)
	[ -z "$pids" ] || die "power-off: processes survive SIGKILL: $(ps -o pid=,args= -p "${pids//$'\n'/,}" | tr '\n' ';')"
}

# svm_pids: every process of this SVM, one pid a line.
svm_pids() {
	{ netns_pids "$NS" || die "namespace $NS is not mounted here: run the hook where it was created"; mount_pids "upperdir=$DIR/root/"; } | sort -u
}

ensure_netns() {
	[ -e "/run/netns/$NS" ] && return 0
	ip netns add "$NS"
	ip -n "$NS" link set lo up
	ip -n "$HUB" link add "s$OCTET" type veth peer name eth0 netns "$NS"
	ip -n "$HUB" link set "s$OCTET" master br0 up
	ip -n "$NS" addr add "$ADDR" dev eth0
	ip -n "$NS" link set eth0 up
}

power_on() {
	if [ -e "$E2E_STATE/fail-boot/$CAIRN_SVM_HOST" ]; then
		power_off
		die "injected failure: the SVM on $CAIRN_SVM_HOST does not boot"
	fi
	ensure_netns
	# A reset powers on again without a power-off: start from a clean slate.
	power_off
	local naa
	for naa in ${CAIRN_SVM_RDMS:-}; do
		[ -f "$DIR/disks/$naa.img" ] || truncate -s "${E2E_DEVICE_SIZE:-2G}" "$DIR/disks/$naa.img"
	done
	# Guest info set by a running guest does not survive a power cycle; the OVF
	# environment is handed in anew at every power-on.
	rm -f "$DIR"/guestinfo/guestinfo.* "$DIR"/sim/units/*
	cp "${CAIRN_SVM_OVFENV:?}" "$DIR/guestinfo/guestinfo.ovfEnv"
	# shellcheck disable=SC2097,SC2098 # REPO is handed on unchanged
	SVM_DIR=$DIR REPO=$REPO CAIRN_BIN=$CAIRN_BIN setsid ip netns exec "$NS" unshare -m -u --propagation private \
		"$REPO/tests/e2e/svm-guest.sh" >>"$DIR/logs/machine.log" 2>&1 </dev/null &
	echo $! >"$DIR/machine.pid"
	local n ready
	for ((n = 0; n < ${E2E_BOOT_TIMEOUT:-90} * 10; n++)); do
		ready=$(cat "$DIR/guestinfo/guestinfo.cairn.ready" 2>/dev/null || true)
		case "$ready" in
		ready) break ;;
		error:*) die "the SVM reports: $ready (see $DIR/sim/units/*.log)" ;;
		esac
		alive "$DIR/machine.pid" || die "the SVM stopped while booting: $(tail -n 3 "$DIR/logs/machine.log" | tr '\n' ' ')"
		sleep 0.1
	done
	[ "$ready" = ready ] || die "not ready after ${E2E_BOOT_TIMEOUT:-90} s (guestinfo.cairn.ready=${ready:-unset}; see $DIR/sim/units/*.log)"
	# What the guest published, for the simulator to show in the VM's extraConfig.
	local f
	for f in "$DIR"/guestinfo/guestinfo.*; do
		[ "${f##*/}" = guestinfo.ovfEnv ] && continue
		printf '%s=%s\n' "${f##*/}" "$(cat "$f")"
	done
}

case ${1:-} in
start) power_on ;;
stop) power_off ;;
*) die "usage: svm-hook.sh start|stop" ;;
esac
