# common.sh - the process, port and polling helpers every test harness shares
# (tests/lib/cluster.sh, tests/chaos, tests/e2e, tests/lio, tests/bench,
# tests/appliance). Sourced, never run; defines functions only, sets no shell
# options and no traps (those belong to the harness).
#
#   free_port                         print a free TCP port on 127.0.0.1
#   free_ports N                      print N distinct free TCP ports, one per line
#   pid_alive PID                     true while PID runs (a zombie counts as dead)
#   alive PIDFILE                     pid_alive on the pid PIDFILE holds (false if no file)
#   spawn [--netns NS] DIR NAME CMD...
#                                     start CMD in a session of its own (in network
#                                     namespace NS), stdin /dev/null, output appended to
#                                     DIR/logs/NAME.log, pid in DIR/pids/NAME.pid; does
#                                     nothing while that pid is alive
#   stop_pidfiles SECONDS PIDFILE...  TERM every pid, wait up to SECONDS for each, KILL
#                                     what is left, delete the pid files
#   pidfile_status DIR                "NAME: running (pid N)" or "NAME: stopped" for
#                                     each DIR/pids/NAME.pid
#   wait_port [--netns NS] [--pidfile FILE] [--log HINT] HOST PORT SECONDS WHAT
#                                     until HOST:PORT accepts a TCP connection (made from
#                                     inside NS); fails early when FILE's process exits
#   wait_for [--every S] SECONDS CMD...
#                                     run CMD (output discarded) every S s (0.5) until it
#                                     succeeds; 1 after SECONDS s of wall-clock time
#   netns_pids NS                     every process in network namespace NS
#   mount_pids MARK                   every process whose mount table names MARK (a
#                                     path under which its mount namespace mounted
#                                     something)
#   pki_dir STATE ROLE NAME [HOSTS]   print the PKI directory (--pki) of daemon NAME,
#                                     issuing its certificate (role ROLE, serving at the
#                                     comma-separated HOSTS) the first time, from the
#                                     cluster CA in STATE/pki/ca (created the first time)
#
# Argument order is the same everywhere: options first, then what to wait on,
# then the limit in seconds, then (wait_port) what it is for. The network
# namespace is always an option, never a positional argument.
#
# Failures: wait_port prints one line on stderr naming what did not come up and
# where to look ("SCRIPT: WHAT did not listen on HOST:PORT within S s (see HINT)")
# and returns 1, which ends a `set -e` harness. wait_for says nothing: each
# harness fails its own way (die, fail, diagnostics first), with its own words.
# shellcheck shell=bash

# free_port: a port that was free on 127.0.0.1, picked below the kernel's
# ephemeral range (as appliance/internal/porttest does): a port from that
# range may become the local port of any outgoing connection on the machine
# (another suite's cluster running at the same time) before the caller binds
# it. Only another picker could take it, and each picks at random; the
# harnesses start the daemon right away and fail clearly when it cannot listen.
free_port() {
	free_ports 1
}

# free_ports N: N distinct free ports, one per line. They are held open
# together while chosen, so (unlike N calls of free_port) no two are equal.
free_ports() {
	python3 -c 'import random, socket, sys
lo = 32768
try:
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    pass
low, high = 20000, max(lo, 20001) - 1
socks = []
n = int(sys.argv[1])
for _ in range(200 * n):
    if len(socks) == n:
        break
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", random.randint(low, high)))
        socks.append(s)
    except OSError:
        s.close()
if len(socks) < n:
    sys.exit("free_ports: no %s free ports between %d and %d on 127.0.0.1" % (sys.argv[1], low, high))
print("\n".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

# pid_alive PID: the process runs. A zombie counts as dead: its sockets and
# files are closed, and daemons reparented to an init that does not reap stay
# zombies for good (kill -0 succeeds on them).
pid_alive() {
	local st
	[ -n "$1" ] || return 1
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# alive PIDFILE: the process whose pid PIDFILE holds runs.
alive() {
	[ -f "$1" ] && pid_alive "$(cat "$1" 2>/dev/null)"
}

# spawn [--netns NS] DIR NAME CMD...: see the top. setsid puts the process in a
# session of its own, so a signal to the harness's process group does not reach
# it; `ip netns exec` execs, so the recorded pid is the command's.
spawn() {
	local ns=""
	if [ "${1:-}" = --netns ]; then ns=$2; shift 2; fi
	local dir=$1 name=$2
	shift 2
	if alive "$dir/pids/$name.pid"; then return 0; fi
	if [ -n "$ns" ]; then
		setsid ip netns exec "$ns" "$@" >>"$dir/logs/$name.log" 2>&1 </dev/null &
	else
		setsid "$@" >>"$dir/logs/$name.log" 2>&1 </dev/null &
	fi
	echo $! >"$dir/pids/$name.pid"
}

# stop_pidfiles SECONDS PIDFILE...: see the top. All get TERM first, so they
# shut down in parallel; the wait is per process.
stop_pidfiles() {
	local secs=$1 f pid n
	shift
	for f in "$@"; do
		[ -e "$f" ] || continue
		kill -TERM "$(cat "$f")" 2>/dev/null || true
	done
	for f in "$@"; do
		[ -e "$f" ] || continue
		pid=$(cat "$f")
		for ((n = 0; n < secs * 20; n++)); do pid_alive "$pid" || break; sleep 0.05; done
		kill -KILL "$pid" 2>/dev/null || true
		rm -f "$f"
	done
}

# pidfile_status DIR: see the top (the status command of the cluster scripts).
pidfile_status() {
	local f
	for f in "$1"/pids/*.pid; do
		[ -e "$f" ] || continue
		if alive "$f"; then
			echo "$(basename "$f" .pid): running (pid $(cat "$f"))"
		else
			echo "$(basename "$f" .pid): stopped"
		fi
	done
}

# wait_port [--netns NS] [--pidfile FILE] [--log HINT] HOST PORT SECONDS WHAT:
# see the top. HINT (a log file or directory) goes into the failure message.
wait_port() {
	local ns="" pidfile="" hint=""
	while [ $# -gt 0 ]; do
		case $1 in
		--netns) ns=$2; shift 2 ;;
		--pidfile) pidfile=$2; shift 2 ;;
		--log) hint=" (see $2)"; shift 2 ;;
		*) break ;;
		esac
	done
	local host=$1 port=$2 secs=$3 what=$4 i
	for ((i = 0; i < secs * 10; i++)); do
		if [ -n "$ns" ]; then
			if ip netns exec "$ns" bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null; then return 0; fi
		elif (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
			return 0
		fi
		if [ -n "$pidfile" ] && ! alive "$pidfile"; then
			echo "${0##*/}: $what exited while starting$hint" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "${0##*/}: $what did not listen on $host:$port within $secs s$hint" >&2
	return 1
}

# wait_for [--every S] SECONDS CMD...: see the top. The limit is wall-clock
# time (a slow CMD uses it up, not a count of tries); CMD always runs at least
# once, and a try that ends past the deadline still counts when it succeeds.
wait_for() {
	local every=0.5
	if [ "${1:-}" = --every ]; then every=$2; shift 2; fi
	local secs=$1 end
	shift
	end=$(($(date +%s%N) / 1000000 + secs * 1000))
	while :; do
		"$@" >/dev/null 2>&1 && return 0
		(($(date +%s%N) / 1000000 < end)) || return 1
		sleep "$every"
	done
}

# netns_pids NS: every process in network namespace NS, one pid a line. (`ip
# netns pids` misses processes that live in further mount namespaces, as the
# e2e's simulated SVMs do.)
#
# A name is only a bind mount of the namespace onto /run/netns/NS, and that
# mount lives in the mount namespace of whoever ran `ip netns add`: a
# namespace named inside `ip netns exec` (whose mount namespace is a slave of
# the caller's) is, seen from outside, an empty file. NS must be a mounted
# namespace here, else this prints nothing and fails (rather than compare
# the empty file's inode and find nobody).
netns_pids() {
	local ino p
	[ -e "/run/netns/$1" ] || return 0
	[ "$(stat -f -c %T "/run/netns/$1" 2>/dev/null)" = nsfs ] || return 1
	ino=$(stat -L -c %i "/run/netns/$1" 2>/dev/null) || return 0
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/ns/net" 2>/dev/null)" = "net:[$ino]" ] && echo "${p#/proc/}"
	done
	return 0
}

# kill_until_gone LISTER [ARGS]: SIGKILL every pid the command LISTER prints,
# again until it prints none, at most 50 times 0.1 s apart (a unit's
# supervisor may restart a daemon between one look and the next); then prints
# whatever LISTER still lists: the survivors.
kill_until_gone() {
	local pids n
	for ((n = 0; n < 50; n++)); do
		pids=$("$@")
		[ -n "$pids" ] || return 0
		# shellcheck disable=SC2086 # one pid a word
		kill -KILL $pids 2>/dev/null || true
		sleep 0.1
	done
	"$@"
}

# mount_pids MARK: every process, one pid a line, whose mount table names
# MARK: the processes of a mount namespace that mounted something from under
# MARK (a bind mount's source, an overlay's upperdir). A mount namespace is
# inherited by every child, whatever session, process group or environment
# it gets, so this finds all that a machine with its own mount namespace
# ever started (the e2e's simulated SVMs: tests/e2e/svm-guest.sh). MARK is
# matched as a fixed string: make it unique (a mktemp directory's name).
mount_pids() {
	local f
	for f in $(grep -lsF -- "$1" /proc/[0-9]*/mountinfo); do
		f=${f#/proc/}
		echo "${f%/mountinfo}"
	done
	return 0
}

# pki_dir STATE ROLE NAME [HOSTS]: see the header. Uses $CAIRN (the cairn binary).
# Resumed clusters keep their CA and certificates.
pki_dir() {
	local state=$1 role=$2 name=$3 hosts=${4:-127.0.0.1,localhost}
	local dir=$state/pki/$name
	if [ ! -f "$state/pki/ca/ca.key" ]; then
		"$CAIRN" pki init --dir "$state/pki/ca" --cluster "$(basename "$state" | tr -c 'A-Za-z0-9._\n-' _)" >/dev/null || return 1
	fi
	if [ ! -f "$dir/node.crt" ]; then
		"$CAIRN" pki issue --ca "$state/pki/ca" --out "$dir" --role "$role" --name "$name" --host "$hosts" >/dev/null || return 1
	fi
	echo "$dir"
}

