#!/usr/bin/env bash
# The roles for real: boots three Debian 12 guests in qemu (TCG), runs the site playbook
# (cairn.storage.site) against them over SSH on forwarded 127.0.0.1 ports, and checks the
# cluster it leaves: every unit active, a volume served over NBD that the host writes
# through an SSH tunnel (nbdcopy) and the guest reads back through /dev/nbd0 (and the
# other way round), and a second run of the playbook that changes nothing.
#
#   node1: mdm sds gateway target nbd     node2: mdm sds     node3: mdm sds
#
# The guests share one L2 segment (10.77.0.0/24, addresses inside the guests only) made
# of qemu socket links over 127.0.0.1: node1's qemu is the hub, node2 and node3 connect
# to it. Each guest also has a user-mode NIC with restrict=on (it reaches nothing) that
# carries the forwarded SSH and gateway ports (NBD goes through an SSH tunnel). The SSH
# key is made for this run.
# Run it under flock /tmp/cairn-heavy.lock (make test-ansible-roles does).
#
# Env: CAIRN_CACHE (guest image cache), KEEP=1 (leave the guests running; stop with
# `run.sh stop RUNDIR`), MEM (MiB per guest, 768).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
IMG=${CAIRN_CACHE:-$HOME/.cache/cairn}/ansible-guest
VENV=$ROOT/.venv
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
say() { echo "[$(date +%H:%M:%S)] $*"; }
die() { echo "roles test: $*" >&2; exit 1; }

stop_guests() { # RUNDIR
	local f
	for f in "$1"/*.pid; do
		[ -e "$f" ] || continue
		kill "$(cat "$f")" 2>/dev/null || true
	done
	sleep 1
	for f in "$1"/*.pid; do
		[ -e "$f" ] || continue
		kill -KILL "$(cat "$f")" 2>/dev/null || true
		rm -f "$f"
	done
}
if [ "${1:-}" = stop ]; then stop_guests "${2:?usage: run.sh stop RUNDIR}"; exit 0; fi

for t in qemu-system-x86_64 qemu-img mkfs.ext4 ssh ssh-keygen nbdinfo nbdcopy; do
	command -v "$t" >/dev/null || die "$t is missing: run scripts/deps.sh ansible-roles"
done
[ -x "$VENV/bin/ansible-playbook" ] || die "no ansible-playbook in $VENV: run scripts/pydeps.sh"
[ -x "$ROOT/appliance/bin/cairn" ] || die "appliance/bin/cairn is missing: run make build"

T0=$(now)
"$HERE/build-guest.sh"
RUN=$(mktemp -d /tmp/cairn-roles.XXXXXX)
cleanup() {
	local rc=$?
	if [ "${KEEP:-0}" = 1 ]; then
		say "guests left running (KEEP=1): $HERE/run.sh stop $RUN"
	else
		[ -f "$RUN/tunnel.pid" ] && kill "$(cat "$RUN/tunnel.pid")" 2>/dev/null
		stop_guests "$RUN"
		[ $rc = 0 ] && rm -rf "$RUN"
	fi
	[ $rc = 0 ] || echo "roles test: FAILED (logs in $RUN: ansible-*.log, node*/serial.log)" >&2
}
trap cleanup EXIT
# The binaries the playbook installs, as they are now: a build during the
# test (make build elsewhere in this tree) must not make the second run
# install new ones.
mkdir "$RUN/bin"
cp "$ROOT/appliance/bin/cairn" "$ROOT/appliance/bin/cairnctl" "$RUN/bin/"

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
ssh-keygen -q -t ed25519 -N '' -C cairn-roles-test -f "$RUN/id"
HUB1=$(free_port) HUB2=$(free_port)

boot() { # N role-of-the-cluster-link
	local n=$1 d=$RUN/node$1
	mkdir -p "$d/seed"
	echo "node$n" >"$d/seed/hostname"
	echo "10.77.0.1$n/24" >"$d/seed/address"
	cp "$RUN/id.pub" "$d/seed/authorized_keys"
	printf '10.77.0.11 node1\n10.77.0.12 node2\n10.77.0.13 node3\n' >"$d/seed/hosts"
	mkfs.ext4 -q -F -L seed -d "$d/seed" "$d/seed.img" 8M
	qemu-img create -q -f qcow2 -F raw -b "$IMG/base.img" "$d/root.qcow2"
	qemu-img create -q -f qcow2 "$d/data1.qcow2" 4G
	local ssh_port gw_port
	ssh_port=$(free_port) gw_port=$(free_port)
	echo "$ssh_port" >"$d/ssh_port"; echo "$gw_port" >"$d/gw_port"
	local link=()
	case $n in
	1) link=(-netdev hubport,id=c0,hubid=0
		-netdev "socket,id=s1,listen=127.0.0.1:$HUB1" -netdev hubport,id=h1,hubid=0,netdev=s1
		-netdev "socket,id=s2,listen=127.0.0.1:$HUB2" -netdev hubport,id=h2,hubid=0,netdev=s2) ;;
	2) link=(-netdev "socket,id=c0,connect=127.0.0.1:$HUB1") ;;
	3) link=(-netdev "socket,id=c0,connect=127.0.0.1:$HUB2") ;;
	esac
	nice qemu-system-x86_64 -accel tcg -cpu max -smp 1 -m "${MEM:-768}" \
		-nodefaults -display none -no-reboot \
		-kernel "$IMG/vmlinuz" -initrd "$IMG/initrd.img" \
		-append "root=/dev/vda rw console=ttyS0 net.ifnames=0 panic=-1 tsc=reliable clocksource=tsc" \
		-serial "file:$d/serial.log" \
		"${link[@]}" -device "virtio-net-pci,netdev=c0,addr=0x3,mac=52:54:00:77:00:1$n" \
		-netdev "user,id=u0,restrict=on,hostfwd=tcp:127.0.0.1:$ssh_port-:22,hostfwd=tcp:127.0.0.1:$gw_port-:8443" \
		-device "virtio-net-pci,netdev=u0,addr=0x4,mac=52:54:00:00:00:1$n" \
		-drive "file=$d/root.qcow2,if=none,id=d0,format=qcow2,cache=unsafe" -device virtio-blk-pci,drive=d0,addr=0x5 \
		-drive "file=$d/seed.img,if=none,id=d1,format=raw,readonly=on" -device virtio-blk-pci,drive=d1,addr=0x6 \
		-drive "file=$d/data1.qcow2,if=none,id=d2,format=qcow2,cache=unsafe" -device virtio-blk-pci,drive=d2,addr=0x7,serial=cairn-data1 \
		-pidfile "$RUN/node$n.pid" >"$d/qemu.log" 2>&1 &
	echo $! >"$RUN/node$n.pid"
}

gssh() { # N command...
	local n=$1; shift
	ssh -q -i "$RUN/id" -p "$(cat "$RUN/node$n/ssh_port")" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
		-o ConnectTimeout=10 -o BatchMode=yes root@127.0.0.1 "$@"
}

say "booting 3 guests (qemu TCG, ${MEM:-768} MiB each)"
t=$(now)
boot 1; sleep 1; boot 2; boot 3
for n in 1 2 3; do
	for ((i = 0; i < 120; i++)); do
		gssh "$n" true 2>/dev/null && break
		kill -0 "$(cat "$RUN/node$n.pid")" 2>/dev/null || { tail -30 "$RUN/node$n/serial.log" >&2; die "node$n's qemu exited"; }
		sleep 3
	done
	gssh "$n" true || { tail -30 "$RUN/node$n/serial.log" >&2; die "node$n: no SSH after 360 s"; }
done
BOOT_S=$(since "$t")
say "guests up (SSH answers) in $BOOT_S s"
gssh 3 "timeout 10 bash -c 'exec 3<>/dev/tcp/10.77.0.12/22'" || die "node3 cannot reach node2 on the cluster segment (through node1's qemu hub)"

INV=$RUN/inventory.yml
{
	cat <<YAML
all:
  vars:
    ansible_host: 127.0.0.1
    ansible_user: root
    ansible_ssh_private_key_file: $RUN/id
    ansible_python_interpreter: /usr/bin/python3
    cairn_system_name: roles-test
    cairn_bin_dir: $RUN/bin
    cairn_volumes: [{name: vol1, size_gb: 1, hosts: [node1]}]
    cairn_sds_devices: [{path: /dev/disk/by-id/virtio-cairn-data1}]
  hosts:
YAML
	for n in 1 2 3; do
		printf '    node%s: {ansible_port: %s, cairn_address: 10.77.0.1%s}\n' "$n" "$(cat "$RUN/node$n/ssh_port")" "$n"
	done
	cat <<YAML
  children:
    cairn_mdm: {hosts: {node1: {}, node2: {}, node3: {}}}
    cairn_sds: {hosts: {node1: {}, node2: {}, node3: {}}}
    cairn_gateway: {hosts: {node1: {}}}
    cairn_target: {hosts: {node1: {}}}
    cairn_nbd:
      hosts:
        node1:
          cairn_nbd_attach: [{volume: vol1, device: nbd0}]
YAML
} >"$INV"

export ANSIBLE_COLLECTIONS_PATH=$ROOT/ansible ANSIBLE_HOST_KEY_CHECKING=False ANSIBLE_PIPELINING=True \
	ANSIBLE_SSH_ARGS="-o ControlMaster=auto -o ControlPersist=300s -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no" \
	ANSIBLE_SSH_CONTROL_PATH_DIR=$RUN/cp ANSIBLE_FORKS=3 ANSIBLE_NOCOLOR=1 ANSIBLE_RETRY_FILES_ENABLED=False ANSIBLE_LOCAL_TEMP=$RUN/tmp

play() { # log-name [ansible-playbook options]
	local name=$1
	shift
	"$VENV/bin/ansible-playbook" -i "$INV" "$@" cairn.storage.site >"$RUN/ansible-$name.log" 2>&1 || {
		tail -40 "$RUN/ansible-$name.log" >&2; die "site playbook ($name) failed"; }
	sed -n '/PLAY RECAP/,$p' "$RUN/ansible-$name.log"
}

say "site playbook, first run"
t=$(now)
play first
FIRST_S=$(since "$t")
say "cluster built by the site playbook in $FIRST_S s"

say "checking the units"
gssh 1 systemctl is-active cairn-mdm cairn-sds cairn-gateway cairn-target cairn-nbd cairn-nbd-attach@nbd0 nftables \
	cairn-certs cairn-join cairn-pki-renew.timer
for n in 2 3; do gssh "$n" systemctl is-active cairn-mdm cairn-sds nftables cairn-certs cairn-join cairn-pki-renew.timer; done
gssh 1 cairnctl system info

say "certificates: every daemon runs with its own, every MDM member keeps the one CA"
for n in 1 2 3; do
	units="cairn-mdm cairn-sds"
	[ "$n" = 1 ] && units="$units cairn-gateway cairn-target cairn-nbd"
	for u in $units; do
		cmd=$(gssh "$n" "tr '\\0' ' ' </proc/\$(systemctl show -p MainPID --value $u)/cmdline")
		case "$cmd" in *" --pki /etc/cairn/pki/"*) ;; *) die "node$n: $u runs without a certificate: $cmd" ;; esac
	done
done
ca1=$(gssh 1 sha256sum /var/lib/cairn/ca/ca.crt | cut -c1-64)
for n in 1 2 3; do
	[ "$(gssh "$n" stat -c %a /var/lib/cairn/ca/ca.key)" = 600 ] || die "node$n: the CA key is not mode 0600"
	[ "$(gssh "$n" sha256sum /var/lib/cairn/ca/ca.crt | cut -c1-64)" = "$ca1" ] || die "node$n keeps another CA than node1 (the creator)"
	[ "$(gssh "$n" stat -c %a /etc/cairn/pki/sds/node.key)" = 600 ] || die "node$n: its sds key is not mode 0600"
done
# etcd: https with client certificates. From node2, with its sds certificate etcd answers;
# without a certificate it must not.
etcd_get() { # CERT-DIR|none
	gssh 2 python3 - "$1" <<'PY'
import socket, ssl, sys
c = ssl.create_default_context(cafile="/etc/cairn/pki/sds/ca.crt")
c.check_hostname = False
if sys.argv[1] != "none":
    c.load_cert_chain(sys.argv[1] + "/node.crt", sys.argv[1] + "/node.key")
try:
    s = c.wrap_socket(socket.create_connection(("10.77.0.11", 2379), 10))
    s.sendall(b"GET /version HTTP/1.0\r\n\r\n")
    print(s.recv(64).split(b"\r\n")[0].decode())
except (OSError, ssl.SSLError) as e:
    print("refused:", e)
PY
}
with=$(etcd_get /etc/cairn/pki/sds) without=$(etcd_get none)
case "$with" in "HTTP/1.0 200"* | "HTTP/1.1 200"*) ;; *) die "etcd did not answer node2's sds certificate: $with" ;; esac
case "$without" in refused:*) ;; *) die "etcd answered a client without a certificate: $without" ;; esac
say "etcd: with node2's certificate '$with'; without one '$without'"

say "renewal: the timer's service runs; forced, node1 (from its CA) and node2 (at node3's join service) renew"
gssh 2 systemctl start cairn-pki-renew.service
serial() { gssh "$1" "cairn pki show --dir /etc/cairn/pki/sds" | awk 'NR==2{print $3}'; }
s1=$(serial 1) s2=$(serial 2)
gssh 1 /usr/local/lib/cairn/cairn-pki-renew --force
gssh 2 cairn pki renew --pki /etc/cairn/pki/sds --url https://10.77.0.13:7443 --force
if [ "$(serial 1)" = "$s1" ] || [ "$(serial 2)" = "$s2" ]; then die "a forced renewal left a certificate unchanged"; fi

# The role serves plain NBD on the guest's loopback only (to the host's own
# nbd-client): the host reaches it the way an admin would, through an SSH
# tunnel.
say "NBD from the host through an SSH tunnel to node1's loopback"
NBD_PORT=$(free_port)
ssh -q -N -i "$RUN/id" -p "$(cat "$RUN/node1/ssh_port")" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
	-o BatchMode=yes -o ExitOnForwardFailure=yes -L "127.0.0.1:$NBD_PORT:127.0.0.1:10809" root@127.0.0.1 &
echo $! >"$RUN/tunnel.pid"
for ((i = 0; i < 50; i++)); do
	timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$NBD_PORT" 2>/dev/null && break
	kill -0 "$(cat "$RUN/tunnel.pid")" 2>/dev/null || die "the SSH tunnel to node1 exited"
	sleep 0.2
done
URI=nbd://127.0.0.1:$NBD_PORT/vol1
size=$(nbdinfo --size "$URI")
[ "$size" = 1073741824 ] || die "vol1 over NBD has $size bytes, want 1073741824"
head -c 4194304 /dev/urandom >"$RUN/pattern"
want=$(sha256sum <"$RUN/pattern" | cut -c1-64)
nbdcopy "$RUN/pattern" "$URI"
got=$(gssh 1 "dd if=/dev/nbd0 bs=1M count=4 iflag=direct status=none | sha256sum" | cut -c1-64)
[ "$got" = "$want" ] || die "the guest's /dev/nbd0 does not read what the host wrote over NBD ($got != $want)"
gssh 1 "head -c 4194304 /dev/urandom > /root/p2 && dd if=/root/p2 of=/dev/nbd0 bs=1M seek=8 oflag=direct status=none && sync"
want=$(gssh 1 "sha256sum < /root/p2" | cut -c1-64)
got=$({ nbdcopy "$URI" - 2>/dev/null || true; } | head -c 12582912 | tail -c +8388609 | head -c 4194304 | sha256sum | cut -c1-64)
[ "$got" = "$want" ] || die "the host does not read over NBD what the guest wrote to /dev/nbd0"
say "vol1: 1 GiB over NBD; host -> guest and guest -> host data match"

# A host that lost a certificate on a running system gets it back with a one-time join
# token made through the first gateway: the playbook takes that path once the CA is more
# than 20 minutes old (the bootstrap window is 30). The CA file's time is set back an hour
# here so that it does at once; the join service itself goes by the CA certificate.
# Limited to node3 (the gateway host is reached by delegation), to keep the test short.
say "a lost certificate on a running system: node3's sds certificate removed, the playbook again (--limit node3)"
old3=$(serial 3)
gssh 1 "touch -d '-1 hour' /var/lib/cairn/ca/ca.crt" # one word: ssh joins its arguments for the remote shell
gssh 3 rm -r /etc/cairn/pki/sds
t=$(now)
play rejoin --limit node3
REJOIN_S=$(since "$t")
grep -q 'Create a one-time join token for sds' "$RUN/ansible-rejoin.log" || die "node3 did not get a join token through the gateway (see $RUN/ansible-rejoin.log)"
new3=$(serial 3)
if [ -z "$new3" ] || [ "$new3" = "$old3" ]; then die "node3 has no new sds certificate after the run ($old3 -> $new3)"; fi
left=$(gssh 1 cairnctl join-token ls --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
[ "$left" = 0 ] || die "the join token made for node3 was not spent: $(gssh 1 cairnctl join-token ls)"
gssh 1 "ls /tmp/*.cairn-join" 2>/dev/null && die "the join token's scratch directory was left on node1"
gssh 3 systemctl restart cairn-sds
gssh 1 cairnctl system info
say "node3 rejoined with a join token in $REJOIN_S s (sds certificate $old3 -> $new3)"

say "site playbook, second run (must change nothing)"
t=$(now)
play second
SECOND_S=$(since "$t")
grep -E '^node[0-9] +:' "$RUN/ansible-second.log" | grep -v 'changed=0 ' && die "the second run changed something (see $RUN/ansible-second.log)"
grep -q 'failed=0' "$RUN/ansible-second.log" || die "second run failed"
say "roles test passed: boot $BOOT_S s, first run $FIRST_S s, second run $SECOND_S s (changed=0), total $(since "$T0") s"
