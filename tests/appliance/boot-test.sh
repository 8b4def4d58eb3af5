#!/bin/bash
# boot-test.sh — boot the Cairn SVM image in qemu (TCG) with a NoCloud seed and check,
# over SSH forwarded to 127.0.0.1 only (key generated here), that first boot applied the
# seeded settings and the role units are up. Then boot a second copy with a hostile seed
# and check, on the serial console, that first boot refused it and configured nothing.
#
# usage: tests/appliance/boot-test.sh IMAGE.ova|IMAGE.qcow2
# env:   BOOT_TIMEOUT (s, default 900), SKIP_BAD_SEED=1, KEEP=1 (keep the work dir),
#        ROLES (default mdm,sds,target,gateway: the roles seeded and checked)
#
# Reports image size, RAM in use after boot and boot-to-ready time. Needs qemu-system-x86,
# qemu-utils, dosfstools, mtools, openssh-client.
set -euo pipefail
IMAGE=$(realpath "${1:?usage: boot-test.sh IMAGE.ova|IMAGE.qcow2}")
BOOT_TIMEOUT=${BOOT_TIMEOUT:-900}
ROLES=${ROLES:-mdm,sds,target,gateway}
UNITS=$(echo "$ROLES" | tr ',' '\n' | sed 's/tiebreaker/mdm/; s/^/cairn-/' | sort -u | tr '\n' ' ')
W=$(mktemp -d /tmp/cairn-boot-test.XXXXXX)
QEMU_PID=""
cleanup() {
  if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then
    kill "$QEMU_PID"; wait "$QEMU_PID" 2>/dev/null || true
  fi
  if [ "${KEEP:-}" = 1 ]; then echo "work dir kept: $W"; else rm -rf "$W"; fi
}
trap cleanup EXIT
fail() { echo "BOOT TEST FAIL: $*" >&2; [ -f "$W/serial.log" ] && { echo "--- serial (tail)"; tail -n 40 "$W/serial.log" | tr -d '\r'; } >&2; exit 1; }
log() { echo "[$(date +%T)] $*"; }

# The disk to boot: the VMDK inside the OVA (what vSphere would import), read through a
# qcow2 overlay so the artifact stays untouched.
if [[ $IMAGE == *.ova ]]; then
  vmdk=$(tar -tf "$IMAGE" | grep '\.vmdk$' | head -1)
  tar -xf "$IMAGE" -C "$W" "$vmdk"
  base=$W/$vmdk; fmt=vmdk
else
  base=$IMAGE; fmt=qcow2
fi
IMAGE_BYTES=$(stat -c %s "$IMAGE")
VSIZE=$(qemu-img info --output=json "$base" | python3 -c 'import json,sys; print(json.load(sys.stdin)["virtual-size"])')

ssh-keygen -q -t ed25519 -N '' -C cairn-boot-test -f "$W/id"
TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')

# make_seed DIR IMG: a vfat filesystem labelled CIDATA holding DIR's files.
make_seed() {
  rm -f "$2"
  mkfs.vfat -n CIDATA -C "$2" 2048 >/dev/null
  mcopy -i "$2" "$1"/* ::/
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# boot NAME SEED_IMG: start qemu on an overlay of the image (kept across boots of the
# same NAME); sets QEMU_PID, SSH_PORT.
boot() {
  local name=$1 seed=$2
  [ -f "$W/$name.qcow2" ] || qemu-img create -q -f qcow2 -b "$base" -F "$fmt" "$W/$name.qcow2"
  SSH_PORT=$(free_port)
  : > "$W/serial.log"
  # restrict=on: the guest reaches nothing outside; only the loopback SSH forward exists.
  qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 2048 -display none -no-reboot \
    -drive file="$W/$name.qcow2",if=virtio,discard=unmap \
    -drive file="$seed",if=virtio,format=raw,readonly=on \
    -netdev user,id=mgmt,restrict=on,hostfwd=tcp:127.0.0.1:"$SSH_PORT"-:22 -device virtio-net-pci,netdev=mgmt \
    -netdev user,id=data,restrict=on,net=10.77.0.0/24 -device virtio-net-pci,netdev=data \
    -serial file:"$W/serial.log" &
  QEMU_PID=$!
  BOOT_START=$(date +%s.%N)
}

stop() {
  kill "$QEMU_PID" 2>/dev/null || true
  wait "$QEMU_PID" 2>/dev/null || true
  QEMU_PID=""
}

wait_serial() { # PATTERN: wait until the serial console shows it
  local deadline=$(( $(date +%s) + BOOT_TIMEOUT ))
  until grep -aq "$1" "$W/serial.log"; do
    kill -0 "$QEMU_PID" 2>/dev/null || fail "qemu exited while waiting for '$1'"
    [ "$(date +%s)" -lt "$deadline" ] || fail "no '$1' on the console after ${BOOT_TIMEOUT}s"
    sleep 2
  done
}

SSH_OPTS=(-i "$W/id" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
          -o BatchMode=yes -o ConnectTimeout=10 -o PasswordAuthentication=no)
vm() { ssh "${SSH_OPTS[@]}" -p "$SSH_PORT" cairn@127.0.0.1 "$@"; }

# ---------------------------------------------------------------- good seed
mkdir -p "$W/seed"
cat > "$W/seed/meta-data" <<EOF
instance-id: boot-test-1
local-hostname: ignored-because-user-data-sets-it
EOF
cat > "$W/seed/user-data" <<EOF
#cairn-config v1
# settings as an admin would fill in the vApp properties
cairn.hostname: svm-boot-test
cairn.mgmt.address: dhcp
cairn.data.address: 10.77.0.5/24
cairn.ntp: 10.0.2.2
cairn.roles: $ROLES
cairn.cluster.name: boot-test
cairn.cluster.join_token: $TOKEN
cairn.cluster.mdm_members: svm-boot-test=10.0.2.15
cairn.target.port_id: 2
cairn.target.port_ids: 1,2,3
cairn.ssh.authorized_key: "$(cat "$W/id.pub")"
EOF
make_seed "$W/seed" "$W/seed.img"

log "booting $(basename "$IMAGE") with a good seed (TCG; this takes minutes)"
boot good "$W/seed.img"
wait_serial "Cairn SVM ready"
READY_S=$(python3 -c "import time; print(round(time.time()-$BOOT_START,1))")
log "ready after ${READY_S}s (qemu start to cairn-ready)"
grep -a "Cairn first boot:" "$W/serial.log" | tr -d '\r' | tail -1

for _ in $(seq 1 30); do vm true 2>/dev/null && break; sleep 2; done
vm true || fail "cannot log in over SSH with the seeded key"

check() { # DESCRIPTION COMMAND...: run on the VM, fail with DESCRIPTION
  local what=$1; shift
  if out=$(vm "$@" 2>&1); then echo "ok   $what"; else echo "$out" >&2; fail "$what"; fi
}
check "hostname is the seeded one"          'test "$(hostname)" = svm-boot-test'
check "role units active: $UNITS"           "systemctl is-active $UNITS"
check "role units enabled for next boots"   "systemctl is-enabled $UNITS cairn-updater cairn-ready"
check "the updater runs"                     "systemctl is-active cairn-updater"
check "first boot stamp"                    'test -f /var/lib/cairn/firstboot.done && test -f /run/cairn/ready'
check "cluster settings in cairn.env"       'grep -qx CAIRN_CLUSTER_NAME=boot-test /etc/cairn/cairn.env && grep -qx CAIRN_ROLES='"$ROLES"' /etc/cairn/cairn.env && grep -qx CAIRN_DATA_ADDRESS=10.77.0.5 /etc/cairn/cairn.env'
check "contract settings in cairn.env"      'grep -qx CAIRN_MDM_INITIAL_CLUSTER=svm-boot-test=https://10.0.2.15:2380 /etc/cairn/cairn.env && grep -qx CAIRN_TARGET_PORT_NUMBER=2 /etc/cairn/cairn.env && grep -qx CAIRN_TARGET_GROUP_PORTS=1,2,3 /etc/cairn/cairn.env'
check "peer sync runs; its settings private" 'systemctl is-active cairn-peersync && test "$(sudo stat -c %a /etc/cairn/settings)" = 600'
check "join token private"                  'test "$(sudo stat -c %a /etc/cairn/join-token)" = 600 && sudo grep -qx '"$TOKEN"' /etc/cairn/join-token'
daemon_args() { echo "ps -o args= -p \$(systemctl show -p MainPID --value cairn-$1)"; }
case ",$ROLES," in *,sds,*)
  check "sds gets the seeded name and data address" "$(daemon_args sds) | grep -q -- '--name svm-boot-test --pki /etc/cairn/pki/sds --listen 10.77.0.5:7100'" ;; esac
case ",$ROLES," in *,mdm,*)
  check "mdm serves etcd on the management address" "$(daemon_args mdm) | grep -q -- '--client-url https://10.0.2.15:2379'" ;; esac
case ",$ROLES," in *,mdm,* | *,tiebreaker,*)
  # The only MDM member keeps the CA: it created it at first boot and issued its own
  # certificates; every daemon runs with one, and the join service serves on 7443.
  check "cluster CA created, key private"     'test "$(sudo stat -c %a /var/lib/cairn/ca/ca.key)" = 600'
  check "certificates, key private"            'for r in $(echo '"$ROLES"' | tr , " " | sed s/tiebreaker/mdm/); do sudo cairn pki show --dir /etc/cairn/pki/$r >/dev/null && sudo cmp -s /etc/cairn/pki/$r/ca.crt /var/lib/cairn/ca/ca.crt && test "$(sudo stat -c %a /etc/cairn/pki/$r/node.key)" = 600 || exit 1; done'
  check "daemons run with their certificate"  "$(daemon_args mdm) | grep -q -- '--pki /etc/cairn/pki/mdm'"
  check "join service runs"                    "systemctl is-active cairn-join" ;; esac
check "static data address on eth1"         'ip -br addr show eth1 | grep -q 10.77.0.5/24'
check "management address from DHCP"        'ip -br addr show eth0 | grep -q 10.0.2.15/'
check "NTP source configured"               'grep -q "server 10.0.2.2 iburst" /etc/chrony/sources.d/cairn.sources'
check "firewall: written by first boot, loaded" 'sudo grep -q "written by cairn firstboot" /etc/nftables.conf && sudo nft list chain inet cairn input | grep -q "policy drop"'
case ",$ROLES," in *,target,*)
  check "firewall: iSCSI only from the data network" 'sudo nft list chain inet cairn input | grep "dport 3260" | grep -q "iifname \"eth1\" ip saddr 10.77.0.0/24"' ;; esac
case ",$ROLES," in *,mdm,*)
  check "firewall: etcd peers only from the members" 'sudo nft list chain inet cairn input | grep "dport 2380" | grep -q "ip saddr 10.0.2.15"' ;; esac
check "sshd: public keys only"              'sudo sshd -T | grep -qx "passwordauthentication no" && sudo sshd -T | grep -qx "permitrootlogin no"'
check "no account has a password"           'test -z "$(sudo awk -F: '"'"'$2 !~ /^[!*]/ {print $1}'"'"' /etc/shadow)"'
check "no build account left"               '! id packer 2>/dev/null && test ! -e /etc/sudoers.d/packer'
check "per-VM identity regenerated"         'test -s /etc/machine-id && ls /etc/ssh/ssh_host_ed25519_key.pub'
check "no failed units"                     'test -z "$(systemctl --failed --plain --no-legend)"'
check "no listeners beyond SSH, iSCSI, Cairn" 'ss -Htln | awk "{print \$4}" | grep -v -e "^127\." -e "^\[::1\]" | sed "s/.*://" | sort -u | grep -vx -e 22 -e 3260 -e 2379 -e 2380 -e 7100 -e 7443 -e 8443 | { ! grep .; }'

MEM_USED_MB=$(vm "free -m | awk '/^Mem:/{print \$3}'")
DISK_USED=$(vm "df -h --output=used / | tail -1" | tr -d ' ')
BOOT_TIME=$(vm "systemd-analyze time 2>/dev/null | head -1" || true)
LISTEN=$(vm "ss -Htln | awk '{print \$4}' | sort -u | tr '\n' ' '")
stop

# ---------------------------------------------------------------- power cycle
# Hard power-off, boot again: first boot must not run again, its files survived (they
# are fsynced), and the role units come back by themselves.
log "power cycle"
boot good "$W/seed.img"
wait_serial "Cairn SVM ready"
log "ready again after $(python3 -c "import time; print(round(time.time()-$BOOT_START,1))")s"
grep -aq "Cairn first boot:" "$W/serial.log" && fail "first boot ran again after the power cycle"
for _ in $(seq 1 30); do vm true 2>/dev/null && break; sleep 2; done
check "after power cycle: same host, units up" "test \$(hostname) = svm-boot-test && systemctl is-active $UNITS"
stop

# ---------------------------------------------------------------- hostile seed
if [ "${SKIP_BAD_SEED:-}" != 1 ]; then
  mkdir -p "$W/bad"
  cat > "$W/bad/user-data" <<EOF
#cairn-config v1
cairn.hostname: svm;reboot
cairn.roles: mdm,sds
cairn.cluster.name: \$(id)
cairn.ssh.authorized_key: "$(cat "$W/id.pub")"
EOF
  make_seed "$W/bad" "$W/bad.img"
  log "booting with a hostile seed"
  boot bad "$W/bad.img"
  wait_serial "nothing was configured"
  for what in "cairn.hostname" "cairn.cluster.name" "cairn.cluster.mdm_members"; do
    grep -aq "$what" "$W/serial.log" || fail "console error does not name $what"
  done
  echo "ok   hostile seed refused with a clear console message:"
  grep -a -A6 "Cairn first boot FAILED" "$W/serial.log" | tr -d '\r' | head -8 | sed 's/^/       /'
  # The refused SVM must not get as far as SSH with the key: no settings were applied.
  sleep 20
  if vm true 2>/dev/null; then fail "SSH login works although first boot refused the seed"; fi
  grep -aq "Cairn SVM ready" "$W/serial.log" && fail "hostile seed reported ready"
  echo "ok   nothing configured (no SSH key, no ready report)"
  stop
fi

echo
echo "== boot test PASSED: $(basename "$IMAGE")"
printf '   image file        %s (%d MiB), OS disk %d GiB virtual, %s used in the guest\n' \
  "$(basename "$IMAGE")" $((IMAGE_BYTES >> 20)) $((VSIZE >> 30)) "$DISK_USED"
printf '   boot-to-ready     %ss (qemu start to guestinfo/ready, TCG 2 vCPU)\n' "$READY_S"
printf '   RAM used          %s MiB of 2048 after ready\n' "$MEM_USED_MB"
printf '   systemd           %s\n' "$BOOT_TIME"
printf '   listening (tcp)   %s\n' "$LISTEN"
