#!/bin/sh
# Runs in the guest: the TCMU reference LUN, Debian's tcmu-runner serving a qcow2 image on the
# guest's tmpfs (its qcow handler: Debian's package has no plain file handler for disks) through
# a LIO user backstore, exported by its own target in demo mode on the shared portal
# 0.0.0.0:3260. The same kernel ring and the same TCG vCPU as Cairn's target: the ratio
# cairn-iscsi / tcmu-runner is Cairn's own cost. Raw configfs writes, like guest-fileio.sh.
# Usage: guest-runner.sh IQN IMAGE   (IMAGE: a qcow2 file, copied to /tmp first)
set -eu
IQN=$1; IMAGE=$2
C=/sys/kernel/config/target
B=$C/core/user_90/runner0
log=/tmp/tcmu-runner.log   # the daemon's stdout; it logs to /var/log/tcmu-runner.log
cp "$IMAGE" /tmp/runner0.qcow2
size=$(od -An -tu8 --endian=big -j24 -N8 /tmp/runner0.qcow2 | tr -d ' ')   # qcow2 header: size
mkdir -p $B
echo "dev_size=$size,dev_config=qcow//tmp/runner0.qcow2" > $B/control
echo "tcmu-runner-ref0" > $B/wwn/vpd_unit_serial
echo 1 > $B/enable
# The daemon opens the devices that exist when it starts (and hears of later ones on netlink).
# It registers on the system bus, where targetcli would ask it to check a configuration.
if [ ! -S /run/dbus/system_bus_socket ]; then
  mkdir -p /run/dbus
  dbus-daemon --system --fork
fi
if ! pgrep -x tcmu-runner >/dev/null; then
  nohup tcmu-runner > "$log" 2>&1 &
fi
i=0
until ls -l /proc/"$(pgrep -x tcmu-runner | head -1)"/fd 2>/dev/null | grep -q /dev/uio; do
  i=$((i+1))
  if [ $i -ge 200 ]; then
    echo "tcmu-runner did not open the device's uio within 20 s: see /var/log/tcmu-runner.log" >&2
    tail -5 /var/log/tcmu-runner.log >&2 || true
    exit 1
  fi
  sleep 0.1
done
"$(dirname "$0")/guest-export.sh" "$IQN" $B
echo "tcmu-runner reference ready: $IQN lun 0, $((size/1024/1024)) MiB; tcmu-runner $(tcmu-runner --version 2>&1 | head -1)"
