#!/bin/bash
# fake-failure.sh STATEDIR RAW_COPY_MBPS - a stand-in for tests/chaos/bench-figures.sh
# that follows the same contract (README.md): it "rebuilds" by copying a 64 MiB
# file with one buffered dd stream and reports that rate as the rebuild figure,
# so the harness's plumbing (records from a hook, ratio_to_raw computed against
# the raw copy rate of the same run) is tested. Never used for published figures.
set -euo pipefail
state=${1:?usage: fake-failure.sh STATEDIR RAW_COPY_MBPS}
[ -n "${2:-}" ] || { echo "fake-failure: no raw copy rate given" >&2; exit 2; }
mkdir -p "$state"
head -c $((64 << 20)) /dev/urandom > "$state/src"
t0=$(date +%s.%N)
dd if="$state/src" of="$state/dst" bs=1M conv=fdatasync status=none
t1=$(date +%s.%N)
rm -f "$state/src" "$state/dst"
python3 -c "import json; print(json.dumps({'target': 'cairn', 'workload': 'rebuild', 'mbps': round(64 * 1048576 / 1e6 / ($t1 - $t0), 1), 'note': 'fake hook (tests only)'}))"
