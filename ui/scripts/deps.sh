#!/usr/bin/env bash
# Installs the UI's npm packages as package-lock.json pins them (from npm's
# cache when it has them), only when the lock file changed since the last
# install (a stamp in node_modules). Browsers are never downloaded: the
# tests use Debian's chromium (scripts/deps.sh ui).
#
# `npm install --no-save` rather than `npm ci`: npm 11's ci refuses this
# lock because the registry has no darwin/win32 builds of msgpackr-extract
# (optional native helpers of the build cache), which npm install skips as
# the optional dependencies they are; --no-save leaves the lock untouched.
set -euo pipefail
UI=$(cd "$(dirname "$0")/.." && pwd)
cd "$UI"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "deps: node and npm are missing for the UI: install Node 20 (apt-get install -y nodejs npm gives Node 18.19, also enough) and re-run" >&2
	exit 1
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 18 ]; then
	echo "deps: Node $(node --version) is too old for Angular 19: install Node 20 and re-run" >&2
	exit 1
fi
stamp=node_modules/.cairn-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
echo "deps: npm install for ui/ (package-lock.json changed or first install)"
t0=$(date +%s)
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 CI=true npm install --no-save --no-audit --no-fund --prefer-offline --loglevel=error
echo "$want" >"$stamp"
echo "deps: ui npm packages installed in $(($(date +%s) - t0)) s"
