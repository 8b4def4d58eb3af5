#!/usr/bin/env bash
# Runs make targets one after another, prints each one's wall time and how
# busy the machine's CPUs were meanwhile (all CPUs together, from
# /proc/stat: a suite at 20 % mostly waits, one near 100 % is bound by the
# CPU), and a summary; fails if any failed (all are run regardless).
set -uo pipefail
declare -a names times results busy
fail=0
cpu_ticks() { # prints "BUSY TOTAL" jiffies of all CPUs so far
	awk '/^cpu /{t=0; for(i=2;i<=9;i++) t+=$i; print t-$5-$6, t; exit}' /proc/stat
}
for t in "$@"; do
	echo "=================== $t"
	s=$(date +%s)
	read -r b0 t0 < <(cpu_ticks)
	if make --no-print-directory "$t"; then r=pass; else r=FAIL; fail=1; fi
	read -r b1 t1 < <(cpu_ticks)
	names+=("$t"); times+=($(($(date +%s) - s))); results+=("$r")
	busy+=($(((b1 - b0) * 100 / (t1 - t0 > 0 ? t1 - t0 : 1))))
	echo "=================== $t: $r in ${times[-1]} s (CPUs ${busy[-1]} % busy)"
done
echo
echo "suite summary:"
for i in "${!names[@]}"; do
	printf '  %-20s %-5s %5d s   CPUs %3d %% busy\n' "${names[$i]}" "${results[$i]}" "${times[$i]}" "${busy[$i]}"
done
exit $fail
