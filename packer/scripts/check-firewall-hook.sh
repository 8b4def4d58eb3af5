#!/usr/bin/env bash
# check-firewall-hook.sh — the image carries the firewall hook (make -C packer test):
#   * the image installs files/nftables.conf as /etc/nftables.conf and enables
#     nftables.service, which loads that file at every boot;
#   * that file, the ruleset before first boot, drops everything inbound by default and
#     opens no TCP port (nft checks its syntax when we are root);
#   * cairn-firstboot runs after nftables.service (its ruleset is loaded last);
#   * the real `cairn firstboot` (dry run on a seed) writes /etc/nftables.conf with the
#     role- and peer-specific rules of appliance/internal/firewall.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fail() { echo "FAIL firewall hook: $*" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/cairn-fwhook.XXXXXX")
trap 'rm -rf "$W"' EXIT

grep -q 'install -m 0755 "$FILES/nftables.conf" /etc/nftables.conf' scripts/10-base.sh ||
  fail "scripts/10-base.sh does not install files/nftables.conf as /etc/nftables.conf"
grep -q '^systemctl enable nftables.service' scripts/10-base.sh || fail "scripts/10-base.sh does not enable nftables.service"
grep -q 'policy drop;' files/nftables.conf || fail "files/nftables.conf: the input chain is not default-deny"
if grep -n 'tcp dport' files/nftables.conf; then fail "files/nftables.conf opens a TCP port before first boot"; fi
if [ "$(id -u)" = 0 ] && command -v nft >/dev/null; then
  nft -c -f files/nftables.conf || fail "nft refuses files/nftables.conf"
fi
grep -qx 'After=nftables.service' files/systemd/cairn-firstboot.service ||
  fail "cairn-firstboot.service is not ordered after nftables.service (its ruleset could be overwritten)"

mkdir -p "$W/seed"
cat >"$W/seed/user-data" <<'SEED'
#cairn-config v1
cairn.hostname: svm-hook
cairn.mgmt.address: 192.0.2.10/24
cairn.data.address: 198.51.100.10/24
cairn.roles: mdm,sds,target
cairn.cluster.name: hook
cairn.cluster.mdm_members: svm-hook=192.0.2.10,svm-b=192.0.2.11,svm-c=192.0.2.12
cairn.cluster.join_token: hook-bootstrap-token-0123456789
cairn.cluster.svms: 192.0.2.10,198.51.100.10,192.0.2.11,198.51.100.11,192.0.2.12,198.51.100.12
SEED
(cd ../appliance && go run ./cmd/cairn firstboot --seed "$W/seed" --dry-run --vmtoolsd - --no-seed-disk) >"$W/plan" 2>&1 ||
  { cat "$W/plan" >&2; fail "cairn firstboot --dry-run refused the sample seed"; }
awk '/^--- \/etc\/nftables.conf /{on=1; next} /^--- /{on=0} on' "$W/plan" >"$W/nftables.conf"
grep -q 'policy drop;' "$W/nftables.conf" || { cat "$W/plan" >&2; fail "first boot does not write /etc/nftables.conf"; }
grep -q 'iifname "eth0" ip saddr { 192.0.2.10, 192.0.2.11, 192.0.2.12 } tcp dport 2380 accept' "$W/nftables.conf" ||
  { cat "$W/nftables.conf" >&2; fail "first boot's ruleset does not limit etcd peers to the MDM members"; }
if grep -q 'dport 8443' "$W/nftables.conf"; then fail "first boot opens the gateway port on an SVM without the gateway role"; fi
if [ "$(id -u)" = 0 ] && command -v nft >/dev/null; then
  nft -c -f "$W/nftables.conf" || fail "nft refuses the ruleset first boot writes"
fi
echo "ok   firewall hook: image loads /etc/nftables.conf (closed before first boot), first boot writes the derived ruleset"
