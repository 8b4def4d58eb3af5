#!/usr/bin/env bash
# Runs make targets one after another, prints each one's wall time, and a
# summary; fails if any failed (all are run regardless).
set -uo pipefail
declare -a names times results
fail=0
for t in "$@"; do
	echo "=================== $t"
	s=$(date +%s)
	if make --no-print-directory "$t"; then r=pass; else r=FAIL; fail=1; fi
	names+=("$t"); times+=($(($(date +%s) - s))); results+=("$r")
	echo "=================== $t: $r in ${times[-1]} s"
done
echo
echo "suite summary:"
for i in "${!names[@]}"; do printf '  %-20s %-5s %5d s\n' "${names[$i]}" "${results[$i]}" "${times[$i]}"; done
exit $fail
