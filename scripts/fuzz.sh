#!/usr/bin/env bash
# Fuzzes every network and input parser of the appliance (every Fuzz*
# function under appliance/, found by name, so a new one is included without
# an edit here) for a bounded time each.
#
#   scripts/fuzz.sh [SECONDS]    default 5 (what `make test` runs: test-fuzz);
#                                `make fuzz` runs 120 s each
#
# Each target's corpus of earlier findings stays in Go's cache; a crasher is
# written to the package's testdata/fuzz/<target>/ and fails the run, with
# the command that replays it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-5}
cd "$ROOT/appliance"
t0=$(date +%s)
gocache=$(go env GOCACHE)
module=$(go list -m)
bins=$(mktemp -d)
log=$bins/fuzz.log
trap 'rm -rf "$bins"' EXIT
# fuzz_once BIN PKG FN: one target of PKG's fuzz test binary BIN for the
# time given, in the package's directory (a finding goes to its
# testdata/fuzz/FN), with the corpus Go's own `go test -fuzz` keeps in its
# cache. The binary is built once per package: go test -fuzz would link it
# (and vet the package) for every target again.
fuzz_once() {
	(cd "$2" && nice "$1" -test.run='^$' -test.fuzz="^$3\$" -test.fuzztime="${secs}s" \
		-test.parallel=2 -test.fuzzcachedir="$gocache/fuzz/$module/${2#./}") >"$log" 2>&1
}
n=0 failed=()
while IFS=: read -r file fn; do
	pkg=./$(dirname "$file")
	n=$((n + 1))
	s=$(date +%s)
	ok=0
	bin=$bins/$(tr / _ <<<"$pkg").test
	if [ ! -x "$bin" ] && ! nice go test -c -fuzz=. -o "$bin" "$pkg" >"$log" 2>&1; then
		tail -20 "$log"
		echo "FAIL fuzz $fn ($pkg): its fuzz test binary does not build: cd appliance && go test -c -fuzz=. $pkg"
		failed+=("$fn")
		continue
	fi
	fuzz_once "$bin" "$pkg" "$fn" && ok=1
	# Go's fuzz engine can stop with "context deadline exceeded" when the time is up while it
	# coordinates its workers, with no failing input: that is not a finding (a finding always
	# writes one to testdata/fuzz). Such a target is fuzzed once more, and says so.
	if [ $ok = 0 ] && grep -q 'context deadline exceeded' "$log" &&
		! grep -q 'Failing input written to' "$log"; then
		echo "fuzz $fn ($pkg): the engine stopped on its own deadline with no failing input; again"
		fuzz_once "$bin" "$pkg" "$fn" && ok=1
	fi
	if [ $ok = 1 ]; then
		echo "fuzz $fn ($pkg): ok in $(($(date +%s) - s)) s"
	else
		tail -20 "$log"
		echo "FAIL fuzz $fn ($pkg): replay with: cd appliance && go test -run '^${fn}\$' $pkg"
		failed+=("$fn")
	fi
done < <(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' internal contract 2>/dev/null | sed 's/:func /:/' | sort)
echo "fuzz: $n targets, ${secs} s each, ${#failed[@]} failed, in $(($(date +%s) - t0)) s"
[ "$n" -gt 0 ] || { echo "FAIL no fuzz targets found"; exit 1; }
[ "${#failed[@]}" -eq 0 ]
