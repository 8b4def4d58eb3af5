# shellcheck shell=bash
# Sourced by firewall.sh and peersync.sh: the start of a test that puts an SVM
# in a network namespace of its own, with a neighbour namespace on each of its
# networks (management, data).
#
#   netns_test PREFIX WHAT [KEEP_VARIABLE]
#
# sets SVM, MGMT and DATA (the namespaces' names, unique per run), W (a work
# directory) and the counters passed and failed with ok and bad; checks the
# tools and root
# (WHAT names the test in that message); on exit stops the processes whose
# pids are in W/*.pid, deletes the namespaces and W (kept when the variable
# named KEEP_VARIABLE is 1). Its probes: listen NS NAME PORT... (a listener in
# NS, pid in W/NAME.pid) and expect NS "SRC DST PORT open|closed WHY"...
# (connections from NS, counted with ok and bad); IPv4 and IPv6 both.
# netns_cairn sets CAIRN (appliance/bin/cairn, or one built into W), for the
# tests that run it.

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
	netns_probes
}

netns_cairn() {
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

# netns_probes: W/listen.py accepts and closes connections on every address
# (IPv6 and IPv4 on one socket where the namespace has IPv6); W/connect.py reads
# lines "SRC DST PORT" and prints "SRC DST PORT open|closed" (1 s each).
netns_probes() {
	cat >"$W/listen.py" <<'EOF'
import selectors, socket, sys
sel = selectors.DefaultSelector()
for port in sys.argv[1:]:
    try:
        s = socket.socket(socket.AF_INET6); s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("::", int(port)))
    except OSError:
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", int(port)))
    s.listen(64); sel.register(s, selectors.EVENT_READ)
print("listening", flush=True)
while True:
    for key, _ in sel.select():
        c, _ = key.fileobj.accept(); c.close()
EOF
	cat >"$W/connect.py" <<'EOF'
import socket, sys
for line in sys.stdin:
    src, dst, port = line.split()
    s = socket.socket(socket.AF_INET6 if ":" in dst else socket.AF_INET); s.settimeout(1.0)
    s.bind((src, 0))  # outside the try: a missing source address is no "closed"
    try:
        s.connect((dst, int(port))); state = "open"
    except OSError:
        state = "closed"
    finally:
        s.close()
    print(src, dst, port, state, flush=True)
EOF
}

listen() { # NS NAME PORT...
	local ns=$1 name=$2; shift 2
	ip netns exec "$ns" python3 "$W/listen.py" "$@" >"$W/$name.log" 2>&1 &
	echo $! >"$W/$name.pid"
	for _ in $(seq 1 50); do grep -q listening "$W/$name.log" && return 0; sleep 0.1; done
	echo "FAIL listener $name did not start: $(cat "$W/$name.log")"; exit 1
}

expect() { # NS "SRC DST PORT open|closed WHY"...: one python run per call
	local ns=$1; shift
	local line
	printf '%s\n' "$@" | awk '{print $1, $2, $3}' | ip netns exec "$ns" python3 "$W/connect.py" >"$W/got" 2>&1 || true
	for line in "$@"; do
		# shellcheck disable=SC2086 # the words of the line
		set -- $line
		local got
		got=$(awk -v s="$1" -v d="$2" -v p="$3" '$1 == s && $2 == d && $3 == p {print $4}' "$W/got")
		shift 3
		local want=$1; shift
		if [ "$got" = "$want" ]; then ok "$want: $*"; else bad "${got:-no answer} (want $want): $*"; fi
	done
}
