#!/bin/sh
# Runs in the guest: a TCMU reference LUN, Debian's tcmu-runner behind a LIO user backstore,
# exported by its own target in demo mode on the shared portal 0.0.0.0:3260. The same kernel
# ring and the same TCG vCPU as Cairn's target. Raw configfs writes, like guest-fileio.sh.
# Usage:
#   guest-runner.sh IQN qcow IMAGE
#       its qcow handler (Debian's package has no plain file handler for disks) on a qcow2
#       image, copied to the guest's tmpfs first: the ratio cairn-iscsi / tcmu-runner is
#       Cairn's own cost beside a local file.
#   guest-runner.sh IQN rbd POOL/IMAGE SIZE_MIB CONF
#       its rbd handler (librbd) on a Ceph image, the cluster named by CONF (a ceph.conf the
#       guest can read): a networked, mirrored backend through the same ring, as Cairn's is.
# One tcmu-runner daemon serves every such LUN; each has a backstore of its own
# (user_90/runner0 for qcow, user_90/runner1 for rbd).
set -eu
IQN=$1; KIND=$2
C=/sys/kernel/config/target
log=/tmp/tcmu-runner.log   # the daemon's stdout; it logs to /var/log/tcmu-runner.log
case $KIND in
  qcow)
    B=$C/core/user_90/runner0
    cp "$3" /tmp/runner0.qcow2
    size=$(od -An -tu8 --endian=big -j24 -N8 /tmp/runner0.qcow2 | tr -d ' ')   # qcow2 header: size
    config=qcow//tmp/runner0.qcow2 ;;
  rbd)
    B=$C/core/user_90/runner1
    size=$(( $4 * 1048576 ))
    # tcmu-runner's rbd handler: rbd/POOL/IMAGE, options after ';'
    config="rbd/$3;conf=$5" ;;
  *) echo "guest-runner.sh: unknown handler $KIND (qcow, rbd)" >&2; exit 2 ;;
esac
mkdir -p $B
echo "dev_size=$size,dev_config=$config" > $B/control
echo "tcmu-runner-$(basename $B)" > $B/wwn/vpd_unit_serial
echo 1 > $B/enable
# The daemon opens the devices that exist when it starts and hears of later ones on netlink.
# It registers on the system bus, where targetcli would ask it to check a configuration.
if [ ! -S /run/dbus/system_bus_socket ]; then
  mkdir -p /run/dbus
  dbus-daemon --system --fork
fi
if ! pgrep -x tcmu-runner >/dev/null; then
  nohup tcmu-runner > "$log" 2>&1 &
fi
# this backstore's uio device (its name ends in the dev_config), then the daemon holding it open
uio=""
i=0
until [ -n "$uio" ] && ls -l /proc/"$(pgrep -x tcmu-runner | head -1)"/fd 2>/dev/null | grep -q "/dev/$uio\$"; do
  for u in /sys/class/uio/uio*; do
    case $(cat "$u/name" 2>/dev/null) in *"/$(basename $B)/"*) uio=$(basename "$u") ;; esac
  done
  i=$((i+1))
  if [ $i -ge 600 ]; then
    echo "tcmu-runner did not open ${uio:-the uio device} of $B within 60 s: see /var/log/tcmu-runner.log" >&2
    tail -5 /var/log/tcmu-runner.log >&2 || true
    exit 1
  fi
  sleep 0.1
done
"$(dirname "$0")/guest-export.sh" "$IQN" $B
echo "tcmu-runner reference ready ($KIND): $IQN lun 0, $((size/1024/1024)) MiB; tcmu-runner $(tcmu-runner --version 2>&1 | head -1)"
