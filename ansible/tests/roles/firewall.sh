#!/usr/bin/env bash
# The roles' firewall for real (part of make test-ansible): the common role's checks and its
# nftables template, run by Ansible for an inventory of three hosts, then each host's ruleset
# loaded with nft into a network namespace that listens on every Cairn port; neighbours on its
# network connect from the inventory's hosts, a data client and strangers, over IPv4 and IPv6.
# Each port must be open to its sources only. Then bad input: the checks must stop the play
# with a message that names the fault.
#
# The inventory (TEST-NET addresses, inside the namespaces only):
#   node1 192.0.2.11  mdm sds gateway (the CA keeper: join service on 7443)
#   node2 192.0.2.12 / 2001:db8::12  sds target
#   node3 192.0.2.13  nbd (a Linux host that uses volumes)
#   data clients 192.0.2.50, 2001:db8::50; SSH only from 192.0.2.13/32; iSCSI only from
#   198.51.100.0/24; the gateway from anywhere (the default).
# Needs root, iproute2, nftables, python3 and the repository's .venv (scripts/pydeps.sh).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
VENV=$ROOT/.venv
ROLE=$ROOT/ansible/ansible_collections/cairn/storage/roles/common
# shellcheck source=../../../tests/security/netns.sh
. "$ROOT/tests/security/netns.sh"
netns_test cairn-afw "the Ansible firewall test" FIREWALL_KEEP
[ -x "$VENV/bin/ansible-playbook" ] || { echo "FAIL no ansible-playbook in $VENV: run scripts/pydeps.sh"; exit 1; }

inventory() { # NODE3-VARIABLES (YAML flow mapping entries) GATEWAY-SOURCES
	cat <<EOF
all:
  vars:
    cairn_role_groups: {mdm: cairn_mdm, sds: cairn_sds, gateway: cairn_gateway, target: cairn_target, nbd: cairn_nbd}
    cairn_pki: true
    cairn_firewall_data_clients: [192.0.2.50, "2001:db8::50"]
    cairn_firewall_ssh_sources: [192.0.2.13/32]
    cairn_firewall_iscsi_sources: [198.51.100.0/24]
    cairn_firewall_gateway_sources: $2
    cairn_firewall_extra_ports: []
  hosts:
    node1: {cairn_address: 192.0.2.11}
    node2: {cairn_address: "2001:db8::12"}
    node3: {$1}
  children:
    cairn_mdm: {hosts: {node1: {}}}
    cairn_sds: {hosts: {node1: {}, node2: {}}}
    cairn_gateway: {hosts: {node1: {}}}
    cairn_target: {hosts: {node2: {}}}
    cairn_nbd: {hosts: {node3: {}}}
EOF
}
# The role's own check and template; the role's defaults that they read are in the
# inventory above (the play loads the role's vars/main.yml, derived from the inventory).
cat >"$W/render.yml" <<EOF
- hosts: all
  gather_facts: false
  tasks:
    - name: The role's derived variables
      ansible.builtin.include_vars: $ROLE/vars/main.yml
    - name: The role's checks
      ansible.builtin.include_tasks: $ROLE/tasks/firewall_check.yml
    - name: The role's ruleset, validated as the role does
      ansible.builtin.template:
        src: $ROLE/templates/nftables.conf.j2
        dest: "$W/{{ inventory_hostname }}.nft"
        mode: "0644"
        validate: nft -c -f %s
EOF
play() { # NAME: runs render.yml on W/NAME.yml, output in W/NAME.log
	ANSIBLE_NOCOLOR=1 ANSIBLE_LOCALHOST_WARNING=False ANSIBLE_LOCAL_TEMP=$W/tmp ANSIBLE_HOME=$W/ansible \
		"$VENV/bin/ansible-playbook" -i "$W/$1.yml" -c local -e "ansible_python_interpreter=$VENV/bin/python" \
		"$W/render.yml" >"$W/$1.log" 2>&1
}
inventory "cairn_address: 192.0.2.13" "[]" >"$W/good.yml"
play good || { cat "$W/good.log"; echo "FAIL the play refused a good inventory"; exit 1; }
ok "checks passed and nft -c accepted each host's ruleset"
[ "${FIREWALL_SHOW:-0}" = 1 ] && cat "$W/node1.nft" "$W/node2.nft"

# host: eth0 <-> the LAN's l0 (names from netns.sh: SVM is the host, MGMT the LAN).
for ns in "$SVM" "$MGMT"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip -n "$SVM" link add eth0 type veth peer name l0 netns "$MGMT"
ip -n "$SVM" addr add 192.0.2.10/24 dev eth0
ip -n "$SVM" addr add 198.51.100.10/24 dev eth0
ip -n "$SVM" addr add 2001:db8::10/64 dev eth0 nodad
for a in 11 12 13 50 99; do ip -n "$MGMT" addr add "192.0.2.$a/24" dev l0; done
ip -n "$MGMT" addr add 198.51.100.21/24 dev l0
for a in 12 50 99; do ip -n "$MGMT" addr add "2001:db8::$a/64" dev l0 nodad; done
ip -n "$SVM" link set eth0 up; ip -n "$MGMT" link set l0 up
listen "$SVM" host 22 2379 2380 3260 7100 7443 8443
H=192.0.2.10 H6=2001:db8::10 I=198.51.100.10

load() { # HOST: its ruleset into the host namespace
	ip netns exec "$SVM" nft -f "$W/$1.nft" || { cat -n "$W/$1.nft"; echo "FAIL nft refuses $1's ruleset"; exit 1; }
}
load node1
expect "$MGMT" \
	"2001:db8::12 $H6 2379 open   node1 etcd client from node2 (an SDS; its cluster address is IPv6)" \
	"192.0.2.12 $H 2379 closed node1 etcd client from node2's IPv4 address (not its cluster address)" \
	"192.0.2.13 $H 2379 open   node1 etcd client from node3 (cairn nbd)" \
	"192.0.2.50 $H 2379 open   node1 etcd client from a data client" \
	"2001:db8::50 $H6 2379 open   node1 etcd client from the IPv6 data client" \
	"192.0.2.99 $H 2379 closed node1 etcd client from a stranger" \
	"2001:db8::99 $H6 2379 closed node1 etcd client from an IPv6 stranger" \
	"192.0.2.12 $H 2380 closed node1 etcd peer from node2 (no MDM member)" \
	"192.0.2.13 $H 7100 open   node1 SDS data port from node3 (a frontend)" \
	"2001:db8::12 $H6 7100 open   node1 SDS data port from node2's IPv6 address (an SDS peer)" \
	"192.0.2.99 $H 7100 closed node1 SDS data port from a stranger" \
	"192.0.2.13 $H 7443 open   node1 join service from node3" \
	"192.0.2.99 $H 7443 closed node1 join service from a stranger" \
	"192.0.2.99 $H 8443 open   node1 gateway from anywhere (no gateway sources set)" \
	"198.51.100.21 $I 3260 closed node1 iSCSI (node1 is no target)" \
	"192.0.2.13 $H 22   open   node1 SSH from cairn_firewall_ssh_sources" \
	"192.0.2.99 $H 22   closed node1 SSH from a stranger"
load node2
expect "$MGMT" \
	"192.0.2.11 $H 7100 open   node2 SDS data port from node1" \
	"192.0.2.99 $H 7100 closed node2 SDS data port from a stranger" \
	"198.51.100.21 $I 3260 open   node2 iSCSI from the initiators' network" \
	"192.0.2.99 $H 3260 closed node2 iSCSI from outside it" \
	"192.0.2.11 $H 2379 closed node2 etcd (node2 is no MDM)" \
	"192.0.2.11 $H 7443 closed node2 join service (node2 keeps no CA)" \
	"192.0.2.11 $H 8443 closed node2 gateway (node2 is no gateway)"

# Bad input: the checks stop the play before any ruleset is written, and say why.
refused() { # NAME WANT-IN-OUTPUT WHY
	rm -f "$W"/node*.nft
	if play "$1"; then
		bad "the play accepted $3"
	elif ! grep -qF -- "$2" "$W/$1.log"; then
		bad "refused $3 without saying '$2':"; grep -E 'msg|fatal' "$W/$1.log" | head -5
	elif compgen -G "$W/node*.nft" >/dev/null; then
		bad "refused $3 but wrote a ruleset first"
	else
		ok "refused $3: '$2'"
	fi
}
inventory "" "[]" >"$W/unknown.yml"
refused unknown "the address of node3 is not known" "a host without cairn_address or facts"
inventory "cairn_address: 192.0.2.13" "[10.0.0.0/33]" >"$W/prefix.yml"
refused prefix "Not an IPv4 or IPv6 address or network: 10.0.0.0/33" "a /33 network"
inventory "cairn_address: node3.example" "[]" >"$W/name.yml"
refused name "Not an IPv4 or IPv6 address or network: node3.example" "a host name as cairn_address"
inventory "cairn_address: 192.0.2.13" "10.0.0.0/8" >"$W/string.yml"
refused string "must be lists" "a string for a list of sources"

echo "ansible firewall: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
