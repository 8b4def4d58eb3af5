#!/usr/bin/env bash
# The SVM firewall for real (part of make test-security; runs alone too): the
# ruleset the real `cairn firstboot` derives from a seed (appliance/internal/
# firewall) is loaded with nft into an "svm" network namespace with the image's
# two NICs (eth0 management 192.0.2.10/24, eth1 data 198.51.100.10/24), which
# listens on every Cairn port, NBD and SSH. Neighbours on each network connect
# from permitted and from other addresses: each port must be open to its peers
# and closed (dropped) to everyone else; replies to the SVM's own connections
# must come back.
# Needs root, iproute2, nftables, python3, go (or appliance/bin/cairn).
set -euo pipefail

# shellcheck source=netns.sh
. "$(dirname "${BASH_SOURCE[0]}")/netns.sh"
netns_test cairn-fw "the firewall test"
netns_cairn

# The settings of SVM svm1: MDM, SDS, target and gateway. svm2 (.11) is an MDM
# member, svm4 (.13) an SVM but no member, .50 runs cairn nbd outside the SVMs,
# SSH only from .13; .99 and the ESXi vmknic 198.51.100.21 are no SVMs.
mkdir -p "$W/seed"
cat >"$W/seed/user-data" <<EOF
#cairn-config v1
cairn.hostname: svm1
cairn.mgmt.address: 192.0.2.10/24
cairn.data.address: 198.51.100.10/24
cairn.roles: mdm,sds,target,gateway
cairn.cluster.name: fw
cairn.cluster.mdm_members: svm1=192.0.2.10,svm2=192.0.2.11,svm3=192.0.2.12
cairn.cluster.gateways: 192.0.2.10
cairn.cluster.svms: 192.0.2.10,198.51.100.10,192.0.2.11,198.51.100.11,192.0.2.12,198.51.100.12,192.0.2.13,198.51.100.13
cairn.cluster.data_clients: 192.0.2.50
cairn.cluster.join_token: firewall-test-token-0123
cairn.ssh.authorized_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMusA5/KUSY+1FXP3mKoSCoib8YRCmz4mDu6Ey3cNF2m test@cairn
cairn.ssh.allow_from: 192.0.2.13/32
EOF
"$CAIRN" firstboot --seed "$W/seed" --dry-run --vmtoolsd - --no-seed-disk >"$W/plan" 2>&1 ||
	{ cat "$W/plan"; echo "FAIL cairn firstboot refused the seed"; exit 1; }
awk '/^--- \/etc\/nftables.conf /{on=1; next} /^--- /{on=0} on' "$W/plan" >"$W/nftables.conf"
grep -q 'policy drop' "$W/nftables.conf" || { cat "$W/plan"; echo "FAIL first boot wrote no /etc/nftables.conf"; exit 1; }

# svm: eth0 <-> mgmt's m0, eth1 <-> data's d0.
for ns in "$SVM" "$MGMT" "$DATA"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip -n "$SVM" link add eth0 type veth peer name m0 netns "$MGMT"
ip -n "$SVM" link add eth1 type veth peer name d0 netns "$DATA"
ip -n "$SVM" addr add 192.0.2.10/24 dev eth0
ip -n "$SVM" addr add 198.51.100.10/24 dev eth1
for a in 11 13 50 99; do ip -n "$MGMT" addr add "192.0.2.$a/24" dev m0; done
for a in 11 21; do ip -n "$DATA" addr add "198.51.100.$a/24" dev d0; done
ip -n "$SVM" link set eth0 up; ip -n "$SVM" link set eth1 up
ip -n "$MGMT" link set m0 up; ip -n "$DATA" link set d0 up

ip netns exec "$SVM" nft -f "$W/nftables.conf" || { cat -n "$W/nftables.conf"; echo "FAIL nft refuses the generated ruleset"; exit 1; }
loaded=$(ip netns exec "$SVM" nft list chain inet cairn input)
[ "${FIREWALL_SHOW:-0}" = 1 ] && echo "$loaded"
if grep -q 'policy drop' <<<"$loaded" && grep 'dport 3260' <<<"$loaded" | grep -q 'iifname "eth1" ip saddr 198.51.100.0/24'; then
	ok "the generated ruleset is loaded (default drop, iSCSI from the data network)"
else
	bad "the loaded input chain is not the generated one:"; echo "$loaded"
fi

listen "$SVM" svm 22 2379 2380 3260 7100 8443 10809
listen "$MGMT" mgmt 9000

S=192.0.2.10 D=198.51.100.10
expect "$MGMT" \
	"192.0.2.11 $S 2380 open   etcd peer from MDM member svm2" \
	"192.0.2.13 $S 2380 closed etcd peer from svm4, an SVM but no MDM member" \
	"192.0.2.13 $S 2379 open   etcd client from svm4 (its daemons use etcd)" \
	"192.0.2.50 $S 2379 open   etcd client from the data client (cairn nbd)" \
	"192.0.2.99 $S 2379 closed etcd client from a stranger on the management network" \
	"192.0.2.13 $S 7100 open   SDS data port from svm4" \
	"192.0.2.50 $S 7100 open   SDS data port from the data client" \
	"192.0.2.99 $S 7100 closed SDS data port from a stranger" \
	"192.0.2.99 $S 8443 open   gateway HTTPS from the management network" \
	"192.0.2.99 $S 3260 closed iSCSI from the management network" \
	"192.0.2.13 $S 22   open   SSH from cairn.ssh.allow_from" \
	"192.0.2.99 $S 22   closed SSH from outside cairn.ssh.allow_from" \
	"192.0.2.11 $S 10809 closed NBD (never served on the SVM) even from an SVM"
expect "$DATA" \
	"198.51.100.21 $D 3260 open   iSCSI from an ESXi vmknic on the data network" \
	"198.51.100.21 $D 7100 closed SDS data port from the vmknic (no SVM)" \
	"198.51.100.11 $D 7100 open   SDS data port from svm2's data address" \
	"198.51.100.21 $D 8443 closed gateway from the data network" \
	"198.51.100.11 $D 2380 closed etcd peer on the data NIC"
expect "$SVM" \
	"$S 192.0.2.99 9000 open   the SVM's own outbound connection (replies accepted: established)"

echo "firewall: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
