#!/usr/bin/env bash
# The installer suite (make test-installer): ruff (lint + format), mypy
# strict, then pytest - doctests, the client's pure parts, cairn-install
# against cairn-vcsim and the plugin server, the client against a local
# cluster. Needs the repo venv (scripts/pydeps.sh) and the built binaries
# (the make target builds them). Prints its own time.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=$ROOT/.venv/bin/python
t0=$(date +%s)
[ -x "$PY" ] || { echo "test-installer: no venv at $ROOT/.venv: run scripts/pydeps.sh" >&2; exit 1; }
for m in ruff mypy pytest pexpect pyVmomi; do
	"$PY" -c "import $m" 2>/dev/null || { echo "test-installer: $m missing in .venv: run scripts/pydeps.sh" >&2; exit 1; }
done
command -v qemu-img >/dev/null || { echo "test-installer: qemu-img missing: apt-get install -y qemu-utils" >&2; exit 1; }
command -v openssl >/dev/null || { echo "test-installer: openssl missing: apt-get install -y openssl" >&2; exit 1; }
cd "$ROOT/installer"
"$PY" -m ruff check src tests
"$PY" -m ruff format --check src tests
"$PY" -m mypy
"$PY" -m mypy tests
"$PY" -m pytest -q -p no:cacheprovider "$@"
echo "test-installer: passed in $(($(date +%s) - t0)) s"
