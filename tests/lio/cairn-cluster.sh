# Sourced by conformance.sh / ats.sh (CAIRN_CLUSTER_SCRIPT): runs a real
# Cairn cluster on the host (tests/lib/cluster.sh), maps one volume as LUN 0
# to libiscsi's two initiator names, and lets the guest's `cairn target`
# reach the MDM and the SDSs through qemu guestfwd (10.0.2.100 in the guest
# is 127.0.0.1 on the host; nothing else is reachable: restrict=on).
# Env: CL_STATE (cluster state directory; default: a new /tmp directory,
# removed by cluster_down), CLUSTER_VOLUME_SIZE (1GiB), CLUSTER_INITIATORS
# (initiator IQNs the volume is mapped to; default "$INI1 $INI2"), CAIRN_STAGE
# (the directory the guest mounts at /cairn; default $WORK/stage): the
# target's certificate goes there, as pki/. CLUSTER_NETNS (unset: the host's
# namespace): a network namespace, made by the caller, to run the cluster and
# cairnctl in (its loopback must be up). Sets CAIRN_TARGET_AUTH (the
# target's --mdm and --pki flags) and CAIRN_TARGET_CMD.
_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [ -z "${CL_STATE:-}" ]; then CL_STATE=$(mktemp -d /tmp/cairn-lio.XXXXXX); _cl_owned=1; else mkdir -p "$CL_STATE"; _cl_owned=0; fi
_in_ns=()
[ -z "${CLUSTER_NETNS:-}" ] || _in_ns=(ip netns exec "$CLUSTER_NETNS")
"${_in_ns[@]}" "$_root/tests/lib/cluster.sh" start "$CL_STATE" --volume-size "${CLUSTER_VOLUME_SIZE:-1GiB}" --volume lun0 >"$CL_STATE/start.log" 2>&1 ||
	{ cat "$CL_STATE/start.log"; echo "cairn-cluster.sh: cluster did not start" >&2; exit 1; }
# shellcheck disable=SC1091
. "$CL_STATE/ports.env"
_ctl() { CAIRNCTL_CONFIG=$CL_STATE/cairnctl.json "${_in_ns[@]}" "$_root/appliance/bin/cairnctl" "$@"; }
_i=0
for _ini in ${CLUSTER_INITIATORS:-$INI1 $INI2}; do
	_i=$((_i + 1))
	_ctl host create "initiator-$_i" --type iscsi --iqn "$_ini" >/dev/null
	_ctl volume map lun0 --host "initiator-$_i" >/dev/null
done
GUESTFWD="10.0.2.100:$MDM1_CLIENT=$MDM1_CLIENT"
for ((_i = 1; _i <= SDS_COUNT; _i++)); do
	_p=SDS${_i}_PORT
	GUESTFWD="$GUESTFWD 10.0.2.100:${!_p}=${!_p}"
done
# The guest's targets authenticate like any target: a certificate of role
# target from the cluster's CA, on the disk that becomes /cairn in the guest
# (CAIRN_STAGE), for etcd (https; the MDM certificates name 10.0.2.100) and
# the data path.
. "$_root/tests/lib/common.sh"
_stage=${CAIRN_STAGE:-$WORK/stage}
rm -rf "$_stage/pki"
cp -a "$(CAIRN=$_root/appliance/bin/cairn pki_dir "$CL_STATE" target lio-target)" "$_stage/pki"
CAIRN_TARGET_AUTH="--mdm https://10.0.2.100:$MDM1_CLIENT --pki /cairn/pki"
CAIRN_TARGET_CMD="env GOMAXPROCS=1 /cairn/cairn target $CAIRN_TARGET_AUTH --iqn $CAIRN_IQN --sds-addr-map 127.0.0.1=10.0.2.100 --log-level warn"
cluster_down() {
	"$_root/tests/lib/cluster.sh" stop "$CL_STATE" >/dev/null 2>&1 || true
	[ "${KEEP_STATE:-0}" = 1 ] || [ "$_cl_owned" = 0 ] || rm -rf "$CL_STATE"
}
