# shellcheck shell=bash
# Sourced by firewall.sh and peersync.sh: the start of a test that puts an SVM
# in a network namespace of its own, with a neighbour namespace on each of its
# networks (management, data).
#
#   netns_test PREFIX WHAT [KEEP_VARIABLE]
#
# sets SVM, MGMT and DATA (the namespaces' names, unique per run), W (a work
# directory), CAIRN (appliance/bin/cairn, or one built into W) and the
# counters passed and failed with ok and bad; checks the tools and root
# (WHAT names the test in that message); on exit stops the processes whose
# pids are in W/*.pid, deletes the namespaces and W (kept when the variable
# named KEEP_VARIABLE is 1).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CAIRN=${CAIRN:-$ROOT/appliance/bin/cairn}
passed=0 failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }

netns_test() {
	local prefix=$1 what=$2 tool
	NETNS_KEEP=${3:-}
	SVM=$prefix$$-svm MGMT=$prefix$$-mgmt DATA=$prefix$$-data
	for tool in ip nft python3; do
		command -v "$tool" >/dev/null || { echo "FAIL $tool is not installed (scripts/deps.sh security)"; exit 1; }
	done
	[ "$(id -u)" -eq 0 ] || { echo "FAIL $what needs root (network namespaces, nft)"; exit 1; }
	W=$(mktemp -d "${TMPDIR:-/tmp}/$prefix.XXXXXX")
	trap netns_cleanup EXIT
	if [ ! -x "$CAIRN" ]; then
		(cd "$ROOT/appliance" && go build -o "$W/cairn" ./cmd/cairn) || { echo "FAIL cairn does not build"; exit 1; }
		CAIRN=$W/cairn
	fi
}

netns_cleanup() {
	local f ns
	for f in "$W"/*.pid; do
		[ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	sleep 0.2
	for ns in "$SVM" "$MGMT" "$DATA"; do ip netns del "$ns" 2>/dev/null || true; done
	if [ -n "$NETNS_KEEP" ] && [ "${!NETNS_KEEP:-0}" = 1 ]; then
		echo "state kept in $W"
		return
	fi
	rm -rf "$W"
}
