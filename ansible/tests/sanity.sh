#!/usr/bin/env bash
# ansible-test sanity for the collection, with the repo's pinned ansible-core, Python 3.11,
# no containers (--local). ansible-test builds one venv per sanity test under
# ~/.ansible/test/venv from its own frozen requirement files (PyPI; cached after the first run).
#
# Those venvs start without pip and ansible-test bootstraps pip with a script it downloads
# from its CI file server, which this machine cannot reach. It reads that script from its
# cache when it is there, so we put a stand-in in the cache: it installs Python's bundled pip
# (ensurepip) and then the pip version ansible-test asked for from PyPI — the same result.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=$ROOT/.venv
[ -x "$VENV/bin/ansible-test" ] || { echo "sanity: no ansible-test in $VENV: run scripts/pydeps.sh" >&2; exit 1; }
t0=$(date +%s)
# The pip version ansible-test bootstraps (its python_requirements.py: pip='X.Y').
pip_version=$(sed -n "s/^ *pip='\([0-9.]*\)',*$/\1/p" "$VENV"/lib/python3*/site-packages/ansible_test/_internal/python_requirements.py | head -1)
[ -n "$pip_version" ] || { echo "sanity: cannot find the pip version ansible-test bootstraps" >&2; exit 1; }
cache=$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py
# Written every run (it is tiny), so a fixed stand-in replaces an older one in the cache.
mkdir -p "$(dirname "$cache")"
cat >"$cache" <<'PY'
# Stand-in for get-pip.py (written by cairn's ansible/tests/sanity.sh): Python's bundled pip,
# then the requested pip from PyPI. Arguments are pip install arguments (get-pip's own
# --no-setuptools/--no-wheel are dropped: nothing else is installed here).
import ensurepip
import os
import subprocess
import sys

# ensurepip drops every PIP_* variable and points PIP_CONFIG_FILE at /dev/null in this
# process's environment; the install from PyPI must see the machine's pip settings again
# (a proxy's CA in PIP_CERT or /etc/pip.conf, an index), or it fails where pip works.
env = dict(os.environ)
ensurepip.bootstrap()
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "pip", "install", *args], env=env)
PY
# The repo's own Python rules first (STYLE.md): ruff lint and format, mypy --strict.
(cd "$ROOT/ansible" && "$VENV/bin/ruff" check --quiet . && "$VENV/bin/ruff" format --check --quiet . && "$VENV/bin/mypy" --no-error-summary) ||
	{ echo "sanity: ruff or mypy found problems (above): fix them (ruff format . in ansible/ rewrites the layout)" >&2; exit 1; }
cd "$ROOT/ansible/ansible_collections/cairn/storage"
PATH=$VENV/bin:$PATH nice "$VENV/bin/ansible-test" sanity --local --python 3.11 --color no "$@"
echo "sanity: passed in $(($(date +%s) - t0)) s"
