# Sourced by conformance.sh / ats.sh (CAIRN_CLUSTER_SCRIPT): runs a real
# Cairn cluster on the host (tests/lib/cluster.sh), maps one volume as LUN 0
# to libiscsi's two initiator names, and lets the guest's `cairn target`
# reach the MDM and the SDSs through qemu guestfwd (10.0.2.100 in the guest
# is 127.0.0.1 on the host; nothing else is reachable: restrict=on).
_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CL_STATE=$(mktemp -d /tmp/cairn-lio.XXXXXX)
"$_root/tests/lib/cluster.sh" start "$CL_STATE" --volume-size 1GiB --volume lun0 >"$CL_STATE/start.log" 2>&1 ||
	{ cat "$CL_STATE/start.log"; echo "cairn-cluster.sh: cluster did not start" >&2; exit 1; }
# shellcheck disable=SC1091
. "$CL_STATE/ports.env"
_ctl() { CAIRNCTL_CONFIG=$CL_STATE/cairnctl.json "$_root/appliance/bin/cairnctl" "$@"; }
_ctl host create libiscsi-1 --type iscsi --iqn "$INI1" >/dev/null
_ctl host create libiscsi-2 --type iscsi --iqn "$INI2" >/dev/null
_ctl volume map lun0 --host libiscsi-1 >/dev/null
_ctl volume map lun0 --host libiscsi-2 >/dev/null
GUESTFWD="10.0.2.100:$MDM1_CLIENT=$MDM1_CLIENT"
for ((_i = 1; _i <= SDS_COUNT; _i++)); do
	_p=SDS${_i}_PORT
	GUESTFWD="$GUESTFWD 10.0.2.100:${!_p}=${!_p}"
done
CAIRN_TARGET_CMD="env GOMAXPROCS=1 /cairn/cairn target --mdm http://10.0.2.100:$MDM1_CLIENT --iqn $CAIRN_IQN --sds-addr-map 127.0.0.1=10.0.2.100 --log-level warn"
cluster_down() {
	"$_root/tests/lib/cluster.sh" stop "$CL_STATE" >/dev/null 2>&1 || true
	[ "${KEEP_STATE:-0}" = 1 ] || rm -rf "$CL_STATE"
}
