#!/bin/bash
# join-test.sh — three SVMs booted from the real OVA in qemu (TCG), each given the OVF
# environment the deploy engine derives from a 3-host plan (cairn-plugin ovf-env: the
# engine's own Plan.VAppProperties), through the ISO transport: a CD-ROM holding
# ovf-env.xml, as vSphere offers it. Their first boots must form one system: a 3-member
# MDM cluster, the first gateway accepting the one-time bootstrap token once, three SDSs
# that take a device each, and a volume.
#
# usage: tests/appliance/join-test.sh IMAGE.ova
# env:   BOOT_TIMEOUT (s, default 1500), KEEP=1 (keep the work dir), CAIRN_PLUGIN and
#        CAIRNCTL (binaries; default: built from this tree)
#
# The SVMs share a bridge in a network namespace of their own (10.251.0.0/24 exists only
# there); the host reaches them from inside that namespace. Needs root, qemu-system-x86,
# qemu-utils, genisoimage, iproute2, openssl, curl, jq.
set -euo pipefail
IMAGE=$(realpath "${1:?usage: join-test.sh IMAGE.ova}")
BOOT_TIMEOUT=${BOOT_TIMEOUT:-1500}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "join-test: needs root (network namespace, tap devices)" >&2; exit 1; }
for c in qemu-system-x86_64 qemu-img genisoimage ip openssl curl jq ssh ssh-keygen; do
  command -v "$c" >/dev/null || { echo "join-test: $c is missing: run scripts/deps.sh appliance" >&2; exit 1; }
done

W=$(mktemp -d /tmp/cairn-join-test.XXXXXX)
NS=cairn-join-$$
PIDS=()
T0=$(date +%s)
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  ip netns del "$NS" 2>/dev/null || true
  if [ "${KEEP:-}" = 1 ]; then echo "work dir kept: $W"; else rm -rf "$W"; fi
}
trap cleanup EXIT
trap 'exit 143' INT TERM # so a stopped test still runs cleanup
log() { echo "[$(date +%T)] $*"; }
fail() {
  echo "JOIN TEST FAIL: $*" >&2
  if [ -s "$W/id" ]; then # the daemons' own logs, over SSH with the plan's key
    for i in 1 2 3; do
      echo "--- svm$i: journalctl -u 'cairn*' (tail)"
      in_ns ssh -i "$W/id" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes \
        -o ConnectTimeout=10 "cairn@$SUBNET.1$i" "sudo journalctl -u 'cairn*' --no-pager | tail -n 30" 2>&1 || true
    done >&2
  fi
  for i in 1 2 3; do
    [ -f "$W/serial$i.log" ] && { echo "--- svm$i serial (tail)"; tail -n 25 "$W/serial$i.log" | tr -d '\r'; } >&2
  done
  exit 1
}
elapsed() { echo "$(($(date +%s) - $1)) s"; }
in_ns() { ip netns exec "$NS" "$@"; }

PLUGIN=${CAIRN_PLUGIN:-}
if [ -z "$PLUGIN" ]; then
  (cd "$ROOT/vcenter-plugin" && go build -o "$W/cairn-plugin" ./cmd/cairn-plugin)
  PLUGIN=$W/cairn-plugin
fi
CAIRNCTL=${CAIRNCTL:-$ROOT/appliance/bin/cairnctl}
CAIRN=${CAIRN:-$ROOT/appliance/bin/cairn}
[ -x "$CAIRNCTL" ] && [ -x "$CAIRN" ] || { echo "join-test: $CAIRNCTL or $CAIRN is missing: run make build" >&2; exit 1; }

# ------------------------------------------------------------------ the plan
# What the wizard would download for three ESXi hosts: every SVM an MDM member and an
# SDS, the first also the gateway. cairn-plugin ovf-env renders the engine's properties.
SUBNET=10.251.0
ssh-keygen -q -t ed25519 -N '' -C cairn-join-test -f "$W/id"
cat >"$W/plan.json" <<EOF
{"version": 1, "system": "isojoin", "datacenter": "DC0", "template": "cairn-svm",
 "protection_domain": "pd1", "storage_pool": {"name": "pool1", "spare_percent": 0},
 "network": {"portgroup": "VM Network", "cidr": "$SUBNET.0/24", "gateway": "$SUBNET.1"},
 "iscsi": {"portgroup": "iSCSI", "cidr": "10.252.0.0/24"},
 "ssh_authorized_key": "$(cat "$W/id.pub")",
 "hosts": [
  {"name": "esx1", "roles": ["mdm", "sds", "gateway", "target"], "svm_ip": "$SUBNET.11"},
  {"name": "esx2", "roles": ["mdm", "sds", "target"], "svm_ip": "$SUBNET.12"},
  {"name": "esx3", "roles": ["mdm", "sds"], "svm_ip": "$SUBNET.13"}]}
EOF
"$PLUGIN" ovf-env -plan "$W/plan.json" -out "$W/env"
SVMS=(cairn-esx1 cairn-esx2 cairn-esx3)
for i in 1 2 3; do
  genisoimage -quiet -r -V OVF_ENV -o "$W/env$i.iso" "$W/env/${SVMS[$((i - 1))]}"
done

# ------------------------------------------------------------------ the network
ip netns add "$NS"
ip -n "$NS" link set lo up
ip -n "$NS" link add br0 type bridge
ip -n "$NS" addr add "$SUBNET.1/24" dev br0
ip -n "$NS" link set br0 up
for i in 1 2 3; do
  ip -n "$NS" tuntap add dev "tap$i" mode tap
  ip -n "$NS" link set "tap$i" master br0
  ip -n "$NS" link set "tap$i" up
done

# ------------------------------------------------------------------ boot
if [[ $IMAGE == *.ova ]]; then
  vmdk=$(tar -tf "$IMAGE" | grep '\.vmdk$' | head -1)
  tar -xf "$IMAGE" -C "$W" "$vmdk"
  base=$W/$vmdk fmt=vmdk
else
  base=$IMAGE fmt=qcow2
fi
log "booting 3 SVMs from $(basename "$IMAGE"), each with its OVF environment on a CD-ROM (TCG; minutes)"
TB=$(date +%s)
for i in 1 2 3; do
  qemu-img create -q -f qcow2 -b "$base" -F "$fmt" "$W/svm$i.qcow2"
  qemu-img create -q -f qcow2 "$W/data$i.qcow2" 8G
  : >"$W/serial$i.log"
  # eth0: the management bridge; eth1 (the OVA's data NIC) unused by this plan.
  # not through in_ns: a function in the background is a subshell, and its pid is not qemu's
  ip netns exec "$NS" qemu-system-x86_64 -accel tcg -cpu max -smp 1 -m 1536 -display none -no-reboot \
    -drive file="$W/svm$i.qcow2",if=none,id=os,discard=unmap -device virtio-blk-pci,drive=os,bootindex=0 \
    -drive file="$W/data$i.qcow2",if=none,id=data,discard=unmap -device virtio-blk-pci,drive=data,serial=cairn-data-$i \
    -drive file="$W/env$i.iso",media=cdrom,readonly=on \
    -netdev tap,id=mgmt,ifname="tap$i",script=no,downscript=no -device virtio-net-pci,netdev=mgmt,mac=52:54:00:25:10:1$i \
    -netdev user,id=data,restrict=on -device virtio-net-pci,netdev=data \
    -serial file:"$W/serial$i.log" &
  PIDS+=($!)
done
deadline=$(($(date +%s) + BOOT_TIMEOUT))
for i in 1 2 3; do
  until grep -aq "Cairn SVM ready" "$W/serial$i.log"; do
    kill -0 "${PIDS[$((i - 1))]}" 2>/dev/null || fail "svm$i: qemu exited"
    grep -aq "Cairn first boot FAILED\|Cairn SVM NOT ready" "$W/serial$i.log" && fail "svm$i: first boot failed"
    [ "$(date +%s)" -lt "$deadline" ] || fail "svm$i: not ready after ${BOOT_TIMEOUT}s"
    sleep 3
  done
  log "svm$i ready ($(elapsed "$TB") after start)"
done
BOOT_S=$(elapsed "$TB")
for i in 1 2 3; do
  src=$(grep -a "Cairn first boot:" "$W/serial$i.log" | tr -d '\r' | tail -1)
  echo "   svm$i: $src"
  [[ $src == *"${SVMS[$((i - 1))]} configured from OVF environment ISO /dev/sr0"* ]] ||
    fail "svm$i did not configure itself from the ISO transport as ${SVMS[$((i - 1))]}"
done

# ------------------------------------------------------------------ the gateway, pinned
GW=https://$SUBNET.11:8443
tp=$(grep -a "Cairn gateway certificate SHA-256:" "$W/serial1.log" | tr -d '\r' | tail -1 | awk '{print $NF}')
[ -n "$tp" ] || fail "svm1 published no gateway thumbprint on its console"
# Ready means the SVM's units started; on a loaded host the first gateway can still time
# out creating the first admin while etcd settles, and restart (systemd): give it minutes.
TG=$(date +%s)
for ((k = 0; k < 60; k++)); do
  in_ns openssl s_client -connect "$SUBNET.11:8443" </dev/null 2>/dev/null | openssl x509 >"$W/gw.pem" 2>/dev/null && break
  sleep 5
done
[ -s "$W/gw.pem" ] || fail "no certificate from the gateway at $GW within 300 s of svm1's readiness"
log "gateway answers ($(elapsed "$TG") after the SVMs were ready)"
served=$(openssl x509 -in "$W/gw.pem" -noout -fingerprint -sha256 | cut -d= -f2 | tr -d : | tr 'A-F' 'a-f')
[ "$served" = "$tp" ] || fail "the gateway serves certificate $served, the SVM published $tp"
echo "ok   the gateway's certificate matches the thumbprint its SVM published ($tp)"

TS=$(date +%s)
umask 077
head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$W/admin-password"
redeem() {
  jq -cn --rawfile t "$W/env/bootstrap-token" --rawfile p "$W/admin-password" '{token: ($t | rtrimstr("\n")), password: ($p | rtrimstr("\n"))}' |
    in_ns curl -s --max-time 150 -o "$W/redeem.out" -w '%{http_code}' --cacert "$W/gw.pem" -H 'Content-Type: application/json' \
      --data-binary @- "$GW/api/v1/bootstrap/admin-password"
}
export CAIRNCTL_CONFIG=$W/cairnctl.json
ctl() { in_ns "$CAIRNCTL" --url "$GW" --ca-file "$W/gw.pem" "$@"; }
# A transport failure (curl: no HTTP status) is retried for 2 minutes: on a loaded host the
# new gateway may still be restarting (see above). Any HTTP answer counts at once.
for ((k = 0; k < 24; k++)); do
  code=$(redeem) || code=000
  [ "$code" = 000 ] || break
  sleep 5
done
# An attempt whose answer was lost (on a loaded host etcd can take minutes and the gateway's
# write timeout cuts the reply) may still have set the password: the retry then gets 401,
# token used. As the deploy engine does (deploy/clustersteps.go), the password logging in
# tells that the token did its work.
if [ "$code" = 401 ] && [ "$k" -gt 0 ] && ctl login --user admin --password-file "$W/admin-password" >/dev/null 2>&1; then
  echo "ok   the one-time bootstrap token set the admin password (an attempt whose answer was lost; the retry got 401 and the password logs in)"
else
  [ "$code" = 200 ] || fail "bootstrap token refused: HTTP $code $(cat "$W/redeem.out" 2>/dev/null)"
  echo "ok   the one-time bootstrap token set the admin password"
fi
code=$(redeem) || code=000
[ "$code" = 401 ] || fail "the used bootstrap token was accepted again: HTTP $code"
echo "ok   the used token is refused (401)"
# Every SVM got its certificates at first boot: svm1 (the first MDM member) created
# the CA and the others joined it with the bootstrap token, which is now redeemed:
# whoever reads it from the VM's settings gets no certificate either.
in_ns "$CAIRN" pki join --url "https://$SUBNET.11:7443" --token-file "$W/env/bootstrap-token" --role mdm --name attacker \
  --out "$W/attacker" >"$W/attacker.out" 2>&1 && fail "the join service issued a certificate for the redeemed bootstrap token"
grep -q "the deployer redeemed the bootstrap token" "$W/attacker.out" || fail "join with the redeemed token: $(cat "$W/attacker.out")"
[ ! -e "$W/attacker/node.crt" ] || fail "a refused join wrote a certificate"
echo "ok   the redeemed bootstrap token gets no certificate from the join service"

ctl login --user admin --password-file "$W/admin-password" >/dev/null

# ------------------------------------------------------------------ one system
members=$(ctl --json mdm ls)
n=$(jq 'map(select(.learner == false and .started != false)) | length' <<<"$members")
leaders=$(jq '[.[] | select(.raft_leader)] | length' <<<"$members")
names=$(jq -r 'map(.name) | sort | join(",")' <<<"$members")
[ "$n" = 3 ] && [ "$leaders" = 1 ] && [ "$names" = cairn-esx1,cairn-esx2,cairn-esx3 ] ||
  fail "want 3 voting MDM members cairn-esx1..3 with one leader, got: $members"
echo "ok   one MDM cluster of 3 members ($names), one leader"

# Every MDM member keeps the CA (svm1 created it, the others fetched it with their mdm
# certificate) and serves joins: the same certificate and key, 0700/0600, on each, and
# a node joins with a one-time join token at svm2's join service alone.
svm() { in_ns ssh -i "$W/id" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes \
  -o ConnectTimeout=10 "cairn@$SUBNET.1$1" "$2"; }
sums=
for i in 1 2 3; do
  s=$(svm "$i" 'sudo stat -c %a /var/lib/cairn/ca /var/lib/cairn/ca/ca.key | tr "\n" " "; sudo cat /var/lib/cairn/ca/ca.crt /var/lib/cairn/ca/ca.key | sha256sum') ||
    fail "svm$i: no CA in /var/lib/cairn/ca"
  [[ $s == "700 600 "* ]] || fail "svm$i: CA directory and key modes: $s"
  sums="$sums${s##* 600 }"$'\n'
done
[ "$(sort -u <<<"$sums" | grep -c .)" = 1 ] || fail "the MDM members hold different CAs: $sums"
ctl join-token create --role client --out "$W/second.token" >/dev/null || fail "no join token"
in_ns "$CAIRN" pki join --url "https://$SUBNET.12:7443" --token-file "$W/second.token" --role client --name join-test-second \
  --out "$W/second" >"$W/second.out" 2>&1 || fail "join at svm2's join service: $(cat "$W/second.out")"
echo "ok   every MDM member holds the same CA (0700, key 0600) and serves joins: a node joined at svm2's"

ctl system bootstrap --name isojoin >/dev/null
ctl pd create pd1 >/dev/null
ctl pool create pool1 --pd pd1 --spare-percent 0 >/dev/null
for i in 1 2 3; do
  ctl sds create "cairn-esx$i" --pd pd1 --address "$SUBNET.1$i:7100" >/dev/null
done
for i in 1 2 3; do
  ctl device create "dev-esx$i" --sds "cairn-esx$i" --pool pool1 --path "/dev/disk/by-id/virtio-cairn-data-$i" >/dev/null ||
    fail "device of cairn-esx$i not added"
done
sys=$(ctl --json system info)
up=$(jq '.health.sds_up_count' <<<"$sys")
[ "$up" = 3 ] || fail "want 3 SDSs up, got: $(jq -c .health <<<"$sys")"
devs=$(ctl --json device ls | jq '[.[] | select(.state == "normal")] | length')
[ "$devs" = 3 ] || fail "want 3 devices in state normal, got $devs"
ctl volume create vol1 --pool pool1 --size 2GiB >/dev/null || fail "volume vol1 not created"
vol=$(ctl --json volume info vol1)
[ "$(jq -r .size <<<"$vol")" = $((2 << 30)) ] || fail "volume vol1: $vol"
echo "ok   3 SDSs up, 3 devices normal, a 2 GiB volume created"
CLUSTER_S=$(elapsed "$TS")

echo
echo "== join test PASSED: $(basename "$IMAGE"): 3 SVMs from the engine's OVF environments (ISO transport)"
printf '   boot to ready (3 SVMs at once, TCG, 1 vCPU each)  %s\n' "$BOOT_S"
printf '   token, cluster, SDSs, devices, volume               %s\n' "$CLUSTER_S"
printf '   whole test                                          %s\n' "$(elapsed "$T0")"
