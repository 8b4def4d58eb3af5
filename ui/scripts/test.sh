#!/usr/bin/env bash
# make test-ui: lint, type check, unit tests, production build (size and
# time; the initial JavaScript must stay under 1.5 MB), then the browser
# tests against the demo stack (cairn-plugin -demo with the built UI), then
# against a real local cluster (e2e/real.mjs).
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

phase "browser tests (chromium, demo stack)"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$ROOT/vcenter-plugin" && go build -o "$bin/cairn-plugin" ./cmd/cairn-plugin)
CHROMIUM=$CHROMIUM node e2e/run.mjs "$bin/cairn-plugin" "$UI/dist/cairn-ui/browser"
done_phase

# The same UI against real Cairn daemons (a local cluster from
# tests/lib/cluster.sh, built here): an SDS killed and its rebuild watched on
# the dashboard until healthy, and a deployment resumed in the wizard
# (e2e/real.mjs; bounded by REAL_BUDGET_S, default 420 s).
phase "browser tests (chromium, real cluster: rebuild, resumed deploy)"
command -v nbdcopy >/dev/null || {
	echo "test-ui: nbdcopy is missing (the real-cluster test writes data over NBD): apt-get install -y libnbd-bin" >&2
	exit 1
}
(cd "$ROOT/appliance" && go build -o "$bin/" ./cmd/...)
CHROMIUM=$CHROMIUM node e2e/real.mjs "$bin/cairn-plugin" "$UI/dist/cairn-ui/browser" "$bin"
done_phase

echo "test-ui: passed in $(($(date +%s) - T0)) s"
