#!/usr/bin/env bash
# CI step for the SVM appliance: build the OVA and boot it in qemu with a
# NoCloud seed (tests/appliance/boot-test.sh). It takes 10-20 minutes under
# TCG, so it runs only when what the image is built from, or the engine's side
# of the contract, changed since the last build verified on this machine, or
# when no verified image is cached;
# otherwise it says so and skips. FORCE_APPLIANCE=1 always runs it.
# Then the three-SVM join test (tests/appliance/join-test.sh, ISO transport):
# three SVMs from the OVA, each with the engine's OVF environment, must form
# one authenticated system (the first MDM member's CA, the others joined with
# the bootstrap token) that takes devices and a volume.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CAIRN_CACHE:-$HOME/.cache/cairn}/packer
mkdir -p "$CACHE"
# The key: what goes into the image or drives its tests. Go test files and fuzz corpora
# (testdata/) of those packages do not: a new fuzz seed must not cost a 10-minute build.
key=$(cd "$ROOT" && find packer tests/appliance appliance/internal/firstboot appliance/internal/join appliance/internal/pki appliance/contract vcenter-plugin/internal/plan vcenter-plugin/internal/deploy/ovfenv.go -type f \
	! -path 'packer/output/*' ! -path 'packer/.work/*' ! -name '*_test.go' ! -path '*/testdata/*' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
stamp=$CACHE/verified-$key
if [ -f "$stamp" ] && [ "${FORCE_APPLIANCE:-0}" != 1 ]; then
	echo "appliance: image inputs unchanged since the build verified on $(cat "$stamp") (key $key): skipping OVA build and boot test"
	echo "1 passed, 0 failed, 1 skipped"
	exit 0
fi
echo "appliance: image inputs changed or no verified image cached (key $key): building the OVA and boot-testing it"
t0=$(date +%s)
# One version for the three steps: a commit made meanwhile must not make
# the boot test build the image again under another name.
version=$(git -C "$ROOT" describe --tags --always --dirty 2>/dev/null || echo dev)
make -C "$ROOT" build
make -C "$ROOT/packer" appliance CAIRN_BIN_DIR="$ROOT/appliance/bin" VERSION="$version"
echo "appliance: OVA built in $(($(date +%s) - t0)) s"
make -C "$ROOT/packer" boot-test VERSION="$version"
t1=$(date +%s)
make -C "$ROOT/packer" join-test VERSION="$version"
echo "appliance: join test in $(($(date +%s) - t1)) s"
date -u +%Y-%m-%dT%H:%MZ >"$stamp"
echo "appliance: built and boot-tested in $(($(date +%s) - t0)) s"
