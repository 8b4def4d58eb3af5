#!/usr/bin/env bash
# make test-ui: lint, type check, unit tests, production build (size and
# time; the initial JavaScript must stay under 1.5 MB), then the browser
# tests against the demo stack (cairn-plugin -demo with the built UI) and,
# at the same time, against a real local cluster (e2e/real.mjs).
set -euo pipefail
UI=$(cd "$(dirname "$0")/.." && pwd)
ROOT=$(cd "$UI/.." && pwd)
cd "$UI"
export CI=true NG_CLI_ANALYTICS=false
T0=$(date +%s)
phase() { echo "== ui: $1"; PT=$(date +%s); }
done_phase() { echo "   ($(($(date +%s) - PT)) s)"; }

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
	echo "test-ui: $CHROMIUM is missing: run scripts/deps.sh ui (apt-get install -y chromium)" >&2
	exit 1
fi
command -v go >/dev/null || {
	echo "test-ui: go is missing (the browser tests build cairn-plugin): install Go 1.26" >&2
	exit 1
}

phase "lint (eslint)"
npx --no-install eslint src e2e scripts
done_phase

phase "type check (tsc, app and tests)"
npx --no-install tsc -p tsconfig.app.json --noEmit
npx --no-install tsc -p tsconfig.spec.json --noEmit
done_phase

phase "unit tests (vitest)"
npx --no-install vitest run
done_phase

phase "production build"
b0=$(date +%s)
npx --no-install ng build --configuration production >"${TMPDIR:-/tmp}/cairn-ui-build.log" 2>&1 || {
	cat "${TMPDIR:-/tmp}/cairn-ui-build.log" >&2
	exit 1
}
node scripts/size.mjs dist/cairn-ui/browser "$(($(date +%s) - b0))"
done_phase

# The browser tests: against the demo stack (cairn-plugin -demo with the
# built UI), and the same UI against real Cairn daemons (a local cluster
# from tests/lib/cluster.sh, built here): an SDS killed and its rebuild
# watched on the dashboard until healthy, and a deployment resumed in the
# wizard (e2e/real.mjs; bounded by REAL_BUDGET_S, default 420 s). The two
# run at once, each with its own plugin server, browser and ports: both
# mostly wait (the suite kept the CPUs 40 % busy when they ran one after the
# other). The real-cluster run's output follows the demo stack's.
command -v nbdcopy >/dev/null || {
	echo "test-ui: nbdcopy is missing (the real-cluster test writes data over NBD): apt-get install -y libnbd-bin" >&2
	exit 1
}
phase "browser tests (chromium: the demo stack, and at the same time a real cluster: rebuild, resumed deploy)"
bin=$(mktemp -d)
real_pid=""
trap '[ -z "$real_pid" ] || kill -TERM "$real_pid" 2>/dev/null; rm -rf "$bin"' EXIT
(cd "$ROOT/vcenter-plugin" && go build -o "$bin/" ./cmd/cairn-plugin)
(cd "$ROOT/appliance" && go build -o "$bin/" ./cmd/...)
CHROMIUM=$CHROMIUM node e2e/real.mjs "$bin/cairn-plugin" "$UI/dist/cairn-ui/browser" "$bin" >"$bin/real.log" 2>&1 &
real_pid=$!
demo_rc=0
CHROMIUM=$CHROMIUM node e2e/run.mjs "$bin/cairn-plugin" "$UI/dist/cairn-ui/browser" || demo_rc=$?
real_rc=0
wait "$real_pid" || real_rc=$?
real_pid=""
echo "-- the real cluster (e2e/real.mjs):"
cat "$bin/real.log"
done_phase
[ "$demo_rc" = 0 ] || { echo "test-ui: the browser tests against the demo stack failed (above)" >&2; exit 1; }
[ "$real_rc" = 0 ] || { echo "test-ui: the browser tests against the real cluster failed (above)" >&2; exit 1; }

echo "test-ui: passed in $(($(date +%s) - T0)) s"
