#!/usr/bin/env bash
# Creates or refreshes the repo's one Python venv (.venv/) from the pinned
# lock file constraints.txt (one name==version per line, sorted: every
# Python tool and library of the repo, e.g. pyVmomi, pytest, mypy, ruff),
# then installs the repo's own Python packages (installer/) editable.
#
#   scripts/pydeps.sh            (scripts/deps.sh installer|ansible calls it)
#
# Fast when up to date: the venv records the SHA-256 of what it was built
# from (constraints.txt, the packages' pyproject.toml, the Python version)
# and a second run with nothing changed does nothing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${CAIRN_VENV:-$ROOT/.venv}
LOCK=$ROOT/constraints.txt
# The repo's own packages, installed editable (no dependencies: the lock file has them).
LOCAL_PKGS=(installer)

command -v python3 >/dev/null || { echo "pydeps: python3 is missing: apt-get install -y python3 python3-venv" >&2; exit 1; }
python3 -c 'import venv, ensurepip' 2>/dev/null || {
	echo "pydeps: the Python venv module is missing: apt-get install -y python3-venv" >&2
	exit 1
}

key() {
	{
		python3 -c 'import sys; print(sys.version)'
		cat "$LOCK"
		for p in "${LOCAL_PKGS[@]}"; do if [ -f "$ROOT/$p/pyproject.toml" ]; then cat "$ROOT/$p/pyproject.toml"; fi; done
	} | sha256sum | cut -d' ' -f1
}
want=$(key)
stamp=$VENV/.cairn-lock.sha256
if [ -x "$VENV/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
	exit 0
fi

t0=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
	echo "pydeps: creating the venv $VENV"
	python3 -m venv "$VENV"
fi
echo "pydeps: installing the pinned Python packages of constraints.txt into $VENV"
rm -f "$stamp"
log=${TMPDIR:-/tmp}/cairn-pydeps.log
pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
if ! "${pip[@]}" install -r "$LOCK" >"$log" 2>&1; then
	tail -20 "$log" >&2
	echo "pydeps: pip install -r constraints.txt failed (log above, full log $log); check that PyPI is reachable and re-run scripts/pydeps.sh" >&2
	exit 1
fi
for p in "${LOCAL_PKGS[@]}"; do
	[ -f "$ROOT/$p/pyproject.toml" ] || continue
	if ! "${pip[@]}" install --no-deps --no-build-isolation -e "$ROOT/$p" >>"$log" 2>&1; then
		tail -20 "$log" >&2
		echo "pydeps: installing $p (editable) failed (log above, full log $log)" >&2
		exit 1
	fi
done
# Anything installed that the lock file does not pin is a missing pin.
if ! "${pip[@]}" check >>"$log" 2>&1; then
	tail -5 "$log" >&2
	echo "pydeps: pip check found inconsistent dependencies (above): fix the pins in constraints.txt" >&2
	exit 1
fi
echo "$want" >"$stamp"
echo "pydeps: venv ready in $(($(date +%s) - t0)) s ($VENV)"
