# shellcheck shell=bash
# Sourced by ab.sh, scaling-qd.sh, idle.sh and profile.sh.
#
# job_args JOB: the fio options of JOB in workloads.conf (empty if unknown).
# Needs REPO (the repository's root).
job_args() {
	awk -v j="$1" '$1 == j { for (i = 3; i <= NF; i++) printf "%s ", $i }' "$REPO/tests/bench/workloads.conf"
}

# sample PIDS...: "cpu_ticks context_switches" of those processes: utime +
# stime from /proc/PID/stat, voluntary + involuntary context switches summed
# over /proc/PID/task/*/status. The caller defines die.
sample() {
	local p t=0 cs=0 f
	for p in "$@"; do
		read -r -a st <"/proc/$p/stat" || die "process $p is gone"
		# Fields 14 and 15 (utime, stime); the command (field 2) has no spaces here.
		t=$((t + st[13] + st[14]))
		for f in /proc/"$p"/task/*/status; do
			cs=$((cs + $(awk '/ctxt_switches/ { n += $2 } END { print n + 0 }' "$f" 2>/dev/null || echo 0)))
		done
	done
	echo "$t $cs"
}
