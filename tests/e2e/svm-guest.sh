#!/usr/bin/env bash
# The "machine" of a simulated Cairn SVM (tests/e2e): what the appliance image and
# systemd do, so that the SVM runs the real first boot and the real units.
#
# svm-hook.sh starts it at power-on inside the SVM's network namespace, in its own
# mount and UTS namespaces (ip netns exec NS unshare -m -u). It
#   1. gives the SVM its own /etc, /var/lib and /usr/local (overlays whose upper
#      directories are the SVM's disk, $SVM_DIR/root/...; they survive power cycles)
#      and a fresh /run (as a reboot would);
#   2. on the first power-on installs the image as Packer does: the guest-side tools
#      of this harness (guest/systemctl, guest/vmtoolsd) into /usr/local/sbin, then
#      packer/scripts/20-cairn.sh with the real binaries, units and cairn-role;
#   3. boots: starts the enabled units as systemd would — cairn-firstboot.service
#      (the real `cairn firstboot`, reading the OVF environment through vmtoolsd) on
#      the first boot, the role units it enabled on every boot — and waits;
#   4. on TERM (power-off) stops the units, last started first.
#
# Environment: SVM_DIR (the SVM's state directory), REPO (the repository root),
# CAIRN_BIN (appliance/bin).
set -uo pipefail
: "${SVM_DIR:?}" "${REPO:?}" "${CAIRN_BIN:?}"
# A machine inherits no open files from whoever pressed its power button (the
# harness may hold a lock, e.g. flock /tmp/cairn-heavy.lock, that its daemons
# must not keep).
for fd in /proc/$$/fd/*; do
	fd=${fd##*/}
	# (255 is the script bash is reading.)
	[ "$fd" -gt 2 ] 2>/dev/null && [ "$fd" != 255 ] && eval "exec $fd>&-" 2>/dev/null
done
log() { echo "[svm-guest $(date +%H:%M:%S)] $*"; }

overlay() { # mountpoint name
	mkdir -p "$SVM_DIR/root/$2" "$SVM_DIR/root/$2.work"
	mount -t overlay "cairn-$2" -o "lowerdir=$1,upperdir=$SVM_DIR/root/$2,workdir=$SVM_DIR/root/$2.work" "$1"
}
set -e
overlay /etc etc
overlay /var/lib var-lib
overlay /usr/local usr-local
mount -t tmpfs -o mode=0755 cairn-run /run
mkdir -p /run/cairn-sim /run/vmware-sim/guestinfo "$SVM_DIR/sim" "$SVM_DIR/guestinfo"
mount --bind "$SVM_DIR/sim" /run/cairn-sim
mount --bind "$SVM_DIR/guestinfo" /run/vmware-sim/guestinfo
set +e
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

if [ ! -e /etc/cairn/build-info ]; then
	log "installing the image (packer/scripts/20-cairn.sh)"
	install -D -m 0755 "$REPO/tests/e2e/guest/systemctl" /usr/local/sbin/systemctl
	install -D -m 0755 "$REPO/tests/e2e/guest/vmtoolsd" /usr/local/sbin/vmtoolsd
	FILES=$REPO/packer/files BIN=$CAIRN_BIN CAIRN_VERSION=e2e bash "$REPO/packer/scripts/20-cairn.sh" ||
		{ log "image installation failed"; exit 1; }
fi
# systemd sets the host name from /etc/hostname early in boot.
[ -s /etc/hostname ] && hostname "$(cat /etc/hostname)"

started=()
note_started() { [[ " ${started[*]} " == *" $1 "* ]] || started+=("$1"); }
shutdown() {
	log "power-off: stopping ${started[*]:-nothing}"
	local i
	for ((i = ${#started[@]} - 1; i >= 0; i--)); do systemctl stop "${started[i]}"; done
	[ -n "${idle:-}" ] && kill "$idle" 2>/dev/null
	exit 0
}
trap shutdown TERM INT

# Boot: the enabled units, in the order their After= lines give (firstboot first,
# readiness last).
log "boot"
for u in cairn-firstboot.service cairn-certs.service cairn-join.service cairn-mdm.service cairn-sds.service cairn-target.service cairn-gateway.service cairn-peersync.service cairn-updater.service cairn-ready.service; do
	[ -e "/etc/systemd/system/multi-user.target.wants/$u" ] || continue
	note_started "$u"
	if [ "$u" = cairn-firstboot.service ]; then
		systemctl start "$u" || log "$u failed (see $SVM_DIR/sim/units/$u.log)"
		# What first boot enabled starts in this boot too (it queued them already).
		for w in cairn-certs.service cairn-join.service cairn-mdm.service cairn-sds.service cairn-target.service cairn-gateway.service cairn-peersync.service cairn-updater.service cairn-ready.service; do
			[ -e "/etc/systemd/system/multi-user.target.wants/$w" ] && note_started "$w"
		done
		continue
	fi
	systemctl start --no-block "$u"
done
log "up: ${started[*]}"
while :; do
	sleep 3600 &
	idle=$!
	wait $idle
done
