#!/usr/bin/env bash
# End-to-end test of the vCenter plugin with real Cairn daemons (make test-e2e):
#
#   simulated vCenter (7 ESXi hosts, govmomi simulator + vcsimkit, on the core
#   namespace's 127.0.0.1) -> deployment plan -> deploy engine clones and powers
#   on 4 SVMs; each power-on runs tests/e2e/svm-hook.sh, which boots the
#   appliance in the SVM's own network, mount and UTS namespaces at the SVM's
#   address (tests/e2e/svm-guest.sh: the image installed by
#   packer/scripts/20-cairn.sh, the real `cairn firstboot` on the OVF
#   environment the simulator rendered, the units of packer/files/systemd run
#   as systemd would; file-backed devices stand for its RDMs); power-off stops
#   them -> cluster healthy through the real gateway -> what the contract left
#   in the SVMs and in vCenter -> a volume -> a VMFS datastore on all 4
#   hosts -> rolling maintenance over the 4 hosts (the plugin fails over to
#   the other gateway while one's host is patched) while fio (nbd engine,
#   verify=crc32c) writes through `cairn nbd` -> a second roll in which an SVM
#   does not come back (its power-on hook fails): the roll stops with a clear
#   message; the resume after the fix completes it -> the SVM lifecycle
#   (vcenter-plugin/e2e/lifecycle.go): expand by 2 hosts in parallel, remove
#   one, replace a failed one (its SVM killed, its host not responding) on a
#   spare host; fio verifies throughout. The kit has 7 hosts: 4 deployed, 2
#   added, 1 spare.
#
# The driver is vcenter-plugin/e2e (Go); it runs in the namespace
# <prefix>-core (10.232.0.1/24) so it reaches the SVMs (10.232.0.11-14) over
# a bridge in <prefix>-hub. The root namespace gets no address, no route.
#
# Environment: E2E_SECOND_MODE=protected runs the second roll (the one with
# the failure) in protected SDS maintenance (default instant); E2E_KEEP=1 keeps the state directory (logs, plan, engine
# state) after the run; CAIRN_CACHE is not used (nothing is downloaded).
# Needs root (network and mount namespaces, overlayfs), iproute2, util-linux
# (unshare), fio.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# alive, netns_pids, mount_pids
# shellcheck source=../lib/common.sh
. "$ROOT/tests/lib/common.sh"
BIN=$ROOT/appliance/bin
HOOK=$ROOT/tests/e2e/svm-hook.sh
PREFIX=cairne2e-$$
BUDGET=${E2E_TIMEOUT:-720} # seconds for the driver (the build comes on top): ~530 s on 2 shared cores, rolling all five SVMs

passed=0 failed=0
say() { echo "[$(date +%H:%M:%S)] $*"; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

for tool in ip fio unshare go; do
	command -v "$tool" >/dev/null || { echo "FAIL $tool is not installed"; failed=1; finish; }
done
[ "$(id -u)" -eq 0 ] || { echo "FAIL the e2e needs root (network namespaces)"; failed=1; finish; }

STATE=$(mktemp -d "${TMPDIR:-/tmp}/cairn-e2e.XXXXXX")
chmod 755 "$STATE"

# run_pids: every process of this run outside the harness itself, one pid a
# line: the processes of the namespaces named here (the driver, fio, cairn
# nbd) and of the SVMs. An SVM's network namespace is named inside the
# driver's mount namespace (svm-hook.sh runs under `ip netns exec`), so from
# here its name is an empty file; every process of an SVM is instead in its
# machine's mount namespace, whose overlays name $STATE/svm/<vm>/root/
# (svm-guest.sh) — whoever started it, in whatever session or environment
# (first boot and the updater start units with systemd's clean environment).
# A machine not yet in its mount namespace carries SVM_DIR.
run_pids() {
	local ns f pid
	{
		for ns in $(ip netns list 2>/dev/null | awk -v p="$PREFIX-" 'index($1, p) == 1 { print $1 }'); do
			netns_pids "$ns"
		done
		mount_pids "upperdir=$STATE/svm/"
		for f in /proc/[0-9]*/environ; do
			grep -qzx "SVM_DIR=$STATE/svm/.*" "$f" 2>/dev/null || continue
			pid=${f#/proc/}
			echo "${pid%/environ}"
		done
	} | sort -un
}

# cleanup: power the SVMs off, stop what the run started, delete its
# namespaces; fails, naming each process, if any survives (a leak must not
# pass silently: it holds ports, files and memory into the next run).
cleanup() {
	local f pids ns left=0
	# A power-off (svm-guest.sh stops its units), as svm-hook.sh's would be.
	for f in "$STATE"/svm/*/machine.pid "$STATE"/pids-nbd; do
		[ -e "$f" ] || continue
		kill -TERM "$(cat "$f")" 2>/dev/null || true
	done
	for _ in $(seq 1 100); do
		pids=$(for f in "$STATE"/svm/*/machine.pid; do alive "$f" && cat "$f"; done)
		[ -z "$pids" ] && break
		sleep 0.1
	done
	# Then whatever is left, until none is (a unit's supervisor may restart a
	# daemon between one look and the next).
	pids=$(kill_until_gone run_pids)
	if [ -n "$pids" ]; then
		echo "FAIL processes of the run survive its cleanup (state kept in $STATE):"
		ps -o pid,pgid,sid,ppid,args -p "$(paste -sd, <<<"$pids")"
		echo "$passed passed, $((failed + 1)) failed"
		left=1
	fi
	for ns in $(ip netns list 2>/dev/null | awk -v p="$PREFIX-" 'index($1, p) == 1 { print $1 }'); do
		ip netns del "$ns" 2>/dev/null || true
	done
	if [ "${E2E_KEEP:-0}" = 1 ] || [ "$left" = 1 ]; then
		echo "state kept in $STATE"
	else
		rm -rf "$STATE"
	fi
	[ "$left" = 0 ]
}
# The run's status, or 1 when its cleanup left processes behind.
on_exit() {
	local rc=$?
	cleanup || { [ "$rc" -ne 0 ] || rc=1; }
	exit "$rc"
}
trap on_exit EXIT
trap 'echo "interrupted"; exit 130' INT TERM

t0=$(date +%s)
say "phase build"
if ! out=$(cd "$ROOT" && nice make --no-print-directory build 2>&1 && cd vcenter-plugin && nice go build -o "$STATE/e2e" ./e2e 2>&1); then
	echo "$out"
	echo "FAIL build"
	failed=1
	finish
fi
# The upgrade phase's new version: the same source built as the next patch release.
cur=$("$BIN/cairn" version)
UPGRADE_BIN=$STATE/upgrade/bin-${cur%.*}.$((${cur##*.} + 1))
if ! out=$(cd "$ROOT/appliance" && nice go build -ldflags \
	"-X github.com/cairn-storage/cairn/appliance/internal/buildinfo.override=${cur%.*}.$((${cur##*.} + 1))" -o "$UPGRADE_BIN/" ./cmd/... 2>&1); then
	echo "$out"
	echo "FAIL build of the upgrade's version"
	failed=1
	finish
fi
echo "=== phase build: $(($(date +%s) - t0)) s"

say "phase network: namespaces $PREFIX-{hub,core}"
ip netns add "$PREFIX-hub" && ip netns add "$PREFIX-core" &&
	ip -n "$PREFIX-hub" link set lo up && ip -n "$PREFIX-core" link set lo up &&
	ip -n "$PREFIX-hub" link add br0 type bridge && ip -n "$PREFIX-hub" link set br0 up &&
	ip -n "$PREFIX-hub" link add core type veth peer name eth0 netns "$PREFIX-core" &&
	ip -n "$PREFIX-hub" link set core master br0 up &&
	ip -n "$PREFIX-core" addr add 10.232.0.1/24 dev eth0 && ip -n "$PREFIX-core" link set eth0 up ||
	{ echo "FAIL cannot create the network namespaces"; failed=1; finish; }

say "phase driver (budget ${BUDGET} s)"
E2E_STATE=$STATE E2E_PREFIX=$PREFIX CAIRN_BIN=$BIN E2E_UPGRADE_BIN=$UPGRADE_BIN \
	timeout --signal=TERM --kill-after=10 "$BUDGET" \
	ip netns exec "$PREFIX-core" "$STATE/e2e" -state "$STATE" -hook "$HOOK" -bin "$BIN" \
	-second-mode "${E2E_SECOND_MODE:-instant}" -timeout "$((BUDGET - 15))s" 2>&1 | tee "$STATE/driver.out"
rc=${PIPESTATUS[0]}
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$STATE/driver.out" | tail -n 1)
if [ -n "$summary" ]; then
	read -r p _ f _ <<<"$summary"
	passed=$((passed + p)) failed=$((failed + f))
fi
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
	echo "FAIL the driver exited with status $rc"
	failed=$((failed + 1))
fi
if [ "$failed" -ne 0 ]; then
	echo "--- last engine events ($STATE/e2e.log)"
	tail -n 25 "$STATE/e2e.log" 2>/dev/null
	for f in "$STATE"/svm/*/logs/*.log "$STATE"/svm/*/sim/units/*.log; do
		[ -e "$f" ] || continue
		echo "--- $f (tail)"
		tail -n 5 "$f"
	done
fi
echo "=== total: $(($(date +%s) - t0)) s"
sed -i '/^[0-9]* passed, [0-9]* failed$/d' "$STATE/driver.out"
finish
