# Helpers for the chaos scenarios (sourced by run.sh; not run alone).
#
# Every wait here has a deadline and every fio run a timeout, so a scenario
# never hangs: a stuck cluster fails the scenario with the reason.
#
# Data layout on the test volume (8 GiB), so that a lost, stale or misplaced
# write is always detectable:
#   PREFILL  offset 0      written once before the fault (1 MiB blocks, crc32c):
#                          the data a rebuild has to copy
#   GEN      offset 3 GiB  overwritten in "generations": fio verify=pattern with
#                          the pattern 0xGGGGGGGG followed by the block's offset
#                          (%o), so a block from an older generation (stale
#                          copy) or another place fails; crc32c cannot tell
#                          an old version of a block from the new one
#   LOAD     offset 4 GiB  fresh region written exactly once during the fault
#                          (randwrite, randommap, crc32c): a lost write reads
#                          back as zeros or an older chunk state and fails
# shellcheck shell=bash

CHAOS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib/common.sh
. "$CHAOS_DIR/../lib/common.sh"
NC=$CHAOS_DIR/netcluster.sh
MIB=$((1 << 20))
GEN_OFF=$((3 << 30))
LOAD_OFF=$((4 << 30))

now_ms() { date +%s%3N; }
log() { echo "[$(date +%H:%M:%S)] $*"; }
# fail MSG: end the scenario; stderr, so it is seen from inside $(...) too.
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
secs() { awk -v ms="$1" 'BEGIN { printf "%.2f", ms / 1000 }'; } # ms -> s

# cluster_start [netcluster options]: fresh cluster in $S; sets the env.
cluster_start() {
	"$NC" start "$S" "$@" >"$S/start.out" 2>&1 || {
		cat "$S/start.out"
		fail "cluster start"
	}
	# shellcheck disable=SC1091
	source "$S/env"
	mkdir -p "$S/fio"
}
ctl() { "$NC" ctl "$S" "$@"; }
core() { "$NC" exec "$S" core "$@"; }

# ctl_json ARGS: cairnctl --json with a timeout (a cluster without quorum
# makes the gateway wait).
ctl_json() { timeout 10 "$NC" ctl "$S" --json "$@" 2>/dev/null; }

sds_field() { # NAME JQ-EXPR
	ctl_json sds ls | jq -r --arg n "$1" ".[] | select(.name == \$n) | $2"
}
sds_up() { [ "$(sds_field "$1" .up)" = true ]; }
sds_used() { sds_field "$1" '.raw_allocated // 0'; }
device_state() { # NAME: the device's state (the model's and what the SDS reports)
	ctl_json device ls | jq -r --arg n "$1" '.[] | select(.name == $n) | "\(.state) \(.reported_state // "")"'
}
system_json() { ctl_json system info; }

# down_watch NAME: poll the gateway (GET /api/v1/sds every 50 ms, one curl
# loop inside the core namespace, so cairnctl's start-up does not inflate
# the measure) until it shows SDS NAME down; the Unix ms of that answer
# goes to $S/down.NAME. Start it before the fault; down_wait collects it.
down_watch() {
	rm -f "$S/down.$1"
	# shellcheck disable=SC2016
	timeout 90 ip netns exec "$CORE" bash -c '
		while :; do
			r=$(curl -s -m 2 --cacert "$2" -H "Authorization: Bearer $1" https://127.0.0.1:8443/api/v1/sds) || r=""
			if jq -e --arg n "$3" ".[] | select(.name == \$n) | .up == false" <<<"$r" >/dev/null 2>&1; then
				date +%s%3N >"$4"
				exit 0
			fi
			sleep 0.05
		done' _ "$(jq -r .token "$CAIRNCTL_CONFIG")" "$S/gateway/cert.pem" "$1" "$S/down.$1" &
	DOWN_WATCH_PID=$!
}
# down_wait NAME SECONDS: the Unix ms at which NAME was first shown down.
down_wait() { watched "$S/down.$1" "$2" "$DOWN_WATCH_PID" "$1 not shown down by the gateway"; }
# rebuilt_watch: poll the gateway (GET /api/v1/system every 50 ms, inside
# the core namespace) until it has shown some group degraded or rebuilding
# and then every group back to two ready copies (no degraded, rebuilding,
# resyncing or rebalancing group); the Unix ms of that answer goes to
# $S/rebuilt. Pending bytes are not waited for: they come from statistics
# the SDSs publish every 2 s, while a group is marked ready only after its
# fill reported, so the map alone says when the data is rebuilt. Start it
# before the fault; rebuilt_wait collects it.
rebuilt_watch() {
	rm -f "$S/rebuilt"
	# shellcheck disable=SC2016
	timeout 300 ip netns exec "$CORE" bash -c '
		seen=0
		while :; do
			r=$(curl -s -m 2 --cacert "$2" -H "Authorization: Bearer $1" https://127.0.0.1:8443/api/v1/system) || r=""
			g=$(jq -r ".rebuild | .degraded_groups + .rebuilding_groups + .resyncing_groups + .rebalancing_groups" <<<"$r" 2>/dev/null) || g=""
			if [ -n "$g" ] && [ "$g" != null ]; then
				if ((g > 0)); then
					seen=1
				elif ((seen)); then
					date +%s%3N >"$3"
					exit 0
				fi
			fi
			sleep 0.05
		done' _ "$(jq -r .token "$CAIRNCTL_CONFIG")" "$S/gateway/cert.pem" "$S/rebuilt" &
	REBUILT_WATCH_PID=$!
}
# rebuilt_wait SECONDS: the Unix ms at which the pool was first shown healed.
rebuilt_wait() { watched "$S/rebuilt" "$1" "$REBUILT_WATCH_PID" "the pool was not shown healed"; }
# watched FILE SECONDS PID WHAT: the Unix ms a watcher (down_watch,
# rebuilt_watch) wrote to FILE; when it wrote nothing within SECONDS, the
# watcher PID is stopped and the scenario fails with "WHAT within SECONDS s".
watched() {
	if wait_for --every 0.1 "$2" test -s "$1"; then
		cat "$1"
		return 0
	fi
	kill "$3" 2>/dev/null || true
	fail "$4 within $2 s"
}
# mdm_reacted_after MS: Unix ms of the leader's first placement map change
# after MS (the system's own detection; informational).
mdm_reacted_after() {
	local t
	t=$(cat "$S"/logs/mdm[123].log | grep 'msg="placement map' | sed -n 's/^time=\([^ ]*\).*/\1/p' |
		while read -r x; do date -d "$x" +%s%3N; done | awk -v a="$1" '$1 > a' | sort -n | head -n 1)
	echo "${t:-0}"
}

# await SECONDS DESC CMD...: wait_for (common.sh) at the scenarios' pace,
# CMD every 0.2 s; at the deadline the scenario fails, naming DESC.
await() {
	local secs=$1 desc=$2
	shift 2
	wait_for --every 0.2 "$secs" "$@" || fail "timed out after $secs s waiting for: $desc"
}

# --- fio ------------------------------------------------------------------

# fio_cmd NAME ARGS...: fio in the core namespace against the export; JSON
# output in $S/fio/NAME.json, stderr in NAME.err. Bounded by FIO_TIMEOUT.
fio_cmd() {
	local name=$1
	shift
	(cd "$S/fio" && timeout -k 10 "${FIO_TIMEOUT:-180}" "$NC" exec "$S" core \
		fio --name="$name" --ioengine=nbd --uri="$NBD_URI" --verify_state_save=0 \
		--output-format=json --output="$S/fio/$name.json" "$@" 2>"$S/fio/$name.err")
}
# fio_ok NAME ARGS...: run, fail the scenario on any fio error.
fio_ok() {
	local name=$1
	fio_cmd "$@" || fio_failed "$name"
	fio_check "$name"
}
fio_failed() {
	echo "--- fio $1 stderr:"
	tail -n 15 "$S/fio/$1.err"
	fail "fio $1 failed"
}
# fio_check NAME: the job reported no error and moved data.
fio_check() {
	local err
	err=$(jq -r '[.jobs[].error] | max' "$S/fio/$1.json" 2>/dev/null) || fio_failed "$1"
	[ "$err" = 0 ] || fio_failed "$1"
}
# fio_bg NAME ARGS...: start in the background; FIO_PID is set.
fio_bg() {
	(
		trap - ERR # its status is collected by fio_wait
		fio_cmd "$@"
	) &
	FIO_PID=$!
}
# fio_wait NAME: wait for the background job; fail on error.
fio_wait() {
	wait "$FIO_PID" || fio_failed "$1"
	fio_check "$1"
}

# The *_args helpers print fio options; their callers split them into words
# on purpose (no option value holds a space).
prefill_args() { # MIB
	echo --rw=write --bs=1m --iodepth=8 --offset=0 --size="${1}m" --verify=crc32c
}
# shellcheck disable=SC2046
prefill() { fio_ok prefill $(prefill_args "$1") --do_verify=0; }
# shellcheck disable=SC2046
verify_prefill() { fio_ok verify-prefill $(prefill_args "$1") --verify_only --verify_fatal=1; }

gen_args() { # GEN MIB
	printf -- '--rw=write --bs=64k --iodepth=8 --offset=%s --size=%sm --verify=pattern --verify_pattern=0x%02x%02x%02x%02x%%o' \
		"$GEN_OFF" "$2" "$1" "$1" "$1" "$1"
}
# shellcheck disable=SC2046
gen_write() { fio_ok "gen$1-write" $(gen_args "$1" "$2") --do_verify=0; }
# shellcheck disable=SC2046
gen_verify() { fio_ok "gen$1-verify${3:-}" $(gen_args "$1" "$2") --verify_only --verify_fatal=1; }

# load_args MIB IOPS: random 16 KiB writes, each block once, at a bounded
# rate so the job spans the fault; every completion logged (Unix ms) to
# measure the I/O pause.
load_args() {
	echo --rw=randwrite --bs=16k --iodepth=8 --offset="$LOAD_OFF" --size="${1}m" \
		--randrepeat=1 --verify=crc32c --verify_fatal=1
}
# shellcheck disable=SC2046
load_bg() {
	fio_bg load $(load_args "$1") --rate_iops="$2" --do_verify=1 \
		--write_lat_log="$S/fio/load" --log_unix_epoch=1
}
# shellcheck disable=SC2046
verify_load() { fio_ok verify-load $(load_args "$1") --verify_only; }

# io_pause [FROM_MS [TO_MS]]: the longest gap (ms) between two consecutive
# write completions of the load job, over completions in [FROM, TO]; also
# prints where it began. One line: "GAP_MS AT_MS COUNT".
io_pause() {
	local from=${1:-0} to=${2:-99999999999999}
	cat "$S"/fio/load_clat.*.log 2>/dev/null | awk -F', *' -v a="$from" -v b="$to" '$3 == 1 && $1 >= a && $1 <= b { print $1 }' |
		sort -n | awk 'NR > 1 && $1 - p > g { g = $1 - p; at = p } { p = $1; n++ } END { printf "%.0f %.0f %.0f\n", g, at, n }'
}
# completions FROM_MS TO_MS: load I/Os completed in the window.
completions() { io_pause "$1" "$2" | awk '{ print $3 }'; }

# --- MDM leader -------------------------------------------------------------

# mdm_leader: the current leader. From `system info` (.leader) when the
# gateway reports it, else from the newest "MDM leader elected" log line of
# a running member.
mdm_leader() {
	local l
	l=$(system_json | jq -r '.leader // .mdm.leader // empty' 2>/dev/null) || true
	if [ -n "$l" ]; then
		echo "$l"
		return
	fi
	local f best="" bt=""
	for f in "$S"/logs/mdm[123].log; do
		local m t
		m=$(basename "$f" .log)
		kill -0 "$(cat "$S/pids/$m.pid" 2>/dev/null)" 2>/dev/null || continue
		t=$(grep 'msg="MDM leader elected"' "$f" | tail -n 1 | sed -n 's/^time=\([^ ]*\).*/\1/p')
		[ -n "$t" ] || continue
		if [[ -z $bt || $t > $bt ]]; then bt=$t best=$m; fi
		# A later "leadership lost" line cancels it.
		if grep 'leadership lost' "$f" | tail -n 1 | sed -n 's/^time=\([^ ]*\).*/\1/p' | awk -v t="$t" '$1 > t { e = 1 } END { exit !e }'; then
			[ "$best" = "$m" ] && best="" bt=""
		fi
	done
	[ -n "$best" ] && echo "$best"
}
# leader_elected_after MS: a running member logged "leader elected" after
# MS; prints "MEMBER ELECTED_MS".
leader_elected_after() {
	local f m t ms
	for f in "$S"/logs/mdm[123].log; do
		m=$(basename "$f" .log)
		kill -0 "$(cat "$S/pids/$m.pid" 2>/dev/null)" 2>/dev/null || continue
		t=$(grep 'msg="MDM leader elected"' "$f" | tail -n 1 | sed -n 's/^time=\([^ ]*\).*/\1/p')
		[ -n "$t" ] || continue
		ms=$(date -d "$t" +%s%3N)
		if [ "$ms" -gt "$1" ]; then
			echo "$m $ms"
			return 0
		fi
	done
	return 1
}

# --- rebuild ------------------------------------------------------------------

# rebuild_state: system info's rebuild object as one line: "DEGRADED
# REBUILDING RESYNCING REBALANCING" placement groups, then pending and done
# bytes; fails when the gateway does not report it.
rebuild_state() {
	system_json | jq -er '.rebuild | "\(.degraded_groups) \(.rebuilding_groups) \(.resyncing_groups) \(.rebalancing_groups) \(.pending_bytes) \(.done_bytes)"'
}
# rebuild_idle: every group has its two ready copies, nothing is pending.
rebuild_idle() {
	local s
	s=$(rebuild_state) || return 1
	[[ $s =~ ^0\ 0\ 0\ 0\ 0\  ]]
}
# wait_rebuild SECONDS: until nothing is degraded, rebuilding, resyncing
# or rebalancing; samples go to $S/rebuild.samples ("MS" + rebuild_state).
# Prints the elapsed ms.
wait_rebuild() {
	local limit=$1 t0 s
	t0=$(now_ms)
	rebuild_state >/dev/null ||
		fail "system info has no \"rebuild\" object (degraded_groups, rebuilding_groups, ..., pending_bytes, done_bytes)"
	while :; do
		s=$(rebuild_state) || s=""
		[ -n "$s" ] && echo "$(now_ms) $s" >>"$S/rebuild.samples"
		[[ $s =~ ^0\ 0\ 0\ 0\ 0\  ]] && break
		(($(now_ms) - t0 > limit * 1000)) &&
			fail "rebuild not done after $limit s (degraded/rebuilding/resyncing/rebalancing groups, pending/done bytes: ${s:-unknown})"
		sleep 0.3
	done
	echo $(($(now_ms) - t0))
}
# wait_settled SECONDS: nothing degraded, rebuilding, resyncing,
# rebalancing or pending for 2 s in a row (steps of a rebalance come and
# go within milliseconds): the steady state a fault is injected into.
wait_settled() {
	local t0 idle=0 s
	t0=$(now_ms)
	while ((idle < 8)); do
		s=$(rebuild_state) || s=""
		if [[ $s =~ ^0\ 0\ 0\ 0\ 0\  ]]; then idle=$((idle + 1)); else idle=0; fi
		(($(now_ms) - t0 < $1 * 1000)) || fail "the cluster did not settle within $1 s (rebuild state: ${s:-unknown})"
		sleep 0.25
	done
}
# rebuild_bytes FIELD: a cluster-wide counter of system info's rebuild
# object (done_bytes: copied by rebuild, rebalance and resync; resync_bytes:
# delta resyncs after maintenance), summed over the live SDSs since they
# started.
rebuild_bytes() { system_json | jq -er --arg f "$1" '.rebuild[$f]'; }

# raw_copy_mbps MIB: the raw device copy rate of $S's filesystem (MB/s):
# dd, 1 MiB blocks, O_DIRECT both sides, 4 streams; the rate a rebuild
# (1 MiB chunk copies, device to device) is compared with.
raw_copy_mbps() {
	local mib=$1 per src=$S/copy-src dst=$S/copy-dst t0 t1 i pids=() ok=1
	per=$((mib / 4))
	fio --name=copysrc --filename="$src" --size="$((per * 4))m" --rw=write --bs=1M --ioengine=psync \
		--direct=1 --output=/dev/null >/dev/null 2>&1 || return 1
	t0=$(now_ms)
	for ((i = 0; i < 4; i++)); do
		timeout 120 dd if="$src" of="$dst" bs=1M count=$per skip=$((i * per)) seek=$((i * per)) \
			iflag=direct oflag=direct conv=notrunc status=none &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || ok=0; done
	sync "$dst"
	t1=$(now_ms)
	rm -f "$src" "$dst"
	[ $ok = 1 ] || return 1
	awk -v b=$((per * 4 * MIB)) -v ms=$((t1 - t0)) 'BEGIN { printf "%.1f", b / 1e6 / (ms / 1000) }'
}

# figure WORKLOAD KEY=VALUE...: one benchmark record (numbers as given).
figure() {
	local w=$1 kv k v json
	shift
	json=$(jq -nc --arg w "$w" '{target: "cairn", workload: $w}')
	for kv in "$@"; do
		k=${kv%%=*} v=${kv#*=}
		json=$(jq -c --arg k "$k" --argjson v "$v" '. + {($k): $v}' <<<"$json")
	done
	echo "$json" >>"$S/figures.jsonl"
	log "figure: $json"
}
