#!/bin/bash
# 20-cairn.sh — install the Cairn binaries and systemd units.
# $BIN holds cairn and cairnctl (uploaded from the Packer variable cairn_bin_dir).
set -euo pipefail
FILES=${FILES:-/tmp/files}
BIN=${BIN:-/tmp}
VERSION=${CAIRN_VERSION:-dev}
echo "== 20-cairn $VERSION"
for b in cairn cairnctl; do
  [ -s "$BIN/$b" ] || { echo "missing $BIN/$b: build them first (cd appliance && go build -o bin/ ./cmd/...)" >&2; exit 1; }
  install -m 0755 "$BIN/$b" /usr/local/bin/$b
done
install -d -m 0755 /etc/cairn /var/lib/cairn /usr/local/lib/cairn
install -m 0755 "$FILES/cairn-role" /usr/local/lib/cairn/cairn-role
for u in cairn-firstboot cairn-certs cairn-join cairn-mdm cairn-sds cairn-target cairn-gateway cairn-peersync cairn-updater cairn-ready; do
  install -m 0644 "$FILES/systemd/$u.service" /etc/systemd/system/$u.service
done
systemctl daemon-reload
# Only first boot is enabled: it enables the role units the deployment settings ask for.
systemctl enable cairn-firstboot.service
# An ordering cycle makes systemd drop a job at boot (silently, from the deployer's view):
# fail the build instead.
verify=$(cd /etc/systemd/system && systemd-analyze verify cairn-firstboot.service cairn-certs.service cairn-join.service cairn-mdm.service \
  cairn-sds.service cairn-target.service cairn-gateway.service cairn-peersync.service cairn-updater.service cairn-ready.service 2>&1 || true)
echo "$verify"
if echo "$verify" | grep -qi 'ordering cycle'; then echo "systemd ordering cycle in the Cairn units" >&2; exit 1; fi
cat > /etc/cairn/build-info <<F
version=$VERSION
built=$(date -u +%Y-%m-%dT%H:%M:%SZ)
os=$(. /etc/os-release; echo "$ID-$VERSION_ID")
F
echo "== 20-cairn done"
