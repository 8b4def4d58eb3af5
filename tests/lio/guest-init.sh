#!/bin/busybox sh
# PID 1 of the LIO test guest (busybox initramfs, Debian's 6.1 cloud kernel).
# Loads the LIO/TCMU modules, mounts the Debian rootfs (/dev/vda, opened with snapshot=on so
# the cached image is never modified) at /rootfs with proc/sys/configfs/dev inside, mounts the
# Cairn disk (/dev/vdb: the cairn binary and the harness's guest scripts) at /rootfs/cairn,
# prints GUEST-READY and runs a shell inside the rootfs on ttyS0 (run-guest.sh cmd drives it).
/bin/busybox mkdir -p /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo 1 > /proc/sys/kernel/printk   # kernel messages would interleave with console command output
for m in virtio_pci virtio_net virtio_blk ext4; do modprobe $m || echo "modprobe $m failed"; done
ip link set lo up
ip addr add 10.0.2.15/24 dev eth0 && ip link set eth0 up && ip route add default via 10.0.2.2
echo "modules loaded at $(cut -d' ' -f1 /proc/uptime)s"
R=/rootfs
mount -t ext4 /dev/vda $R || { echo "GUEST-FAILED: no rootfs on /dev/vda"; exec sh; }
mount -t proc proc $R/proc
mount -o bind /sys $R/sys
mount -o bind /dev $R/dev
mkdir -p $R/dev/pts && mount -t devpts devpts $R/dev/pts
mount -t tmpfs -o size=90% tmpfs $R/tmp
mount -t tmpfs tmpfs $R/run
mkdir -p $R/lib/modules && mount -o bind /lib/modules $R/lib/modules
# LIO's db_root (/etc/target: PR and ALUA state; PERSISTENT RESERVE OUT fails with NOT READY
# without it) is resolved in the kernel's root, which is this initramfs: share the rootfs's
# directory (where rtslib saves saveconfig.json) before the target modules load.
mkdir -p $R/etc/target/pr $R/etc/target/alua /etc/target /var/target
mount -o bind $R/etc/target /etc/target
mkdir -p $R/var/target/pr $R/var/target/alua && mount -o bind $R/var/target /var/target
for m in target_core_file target_core_iblock target_core_user iscsi_target_mod; do
  modprobe $m || echo "modprobe $m failed"
done
mount -t configfs configfs /sys/kernel/config
mount -t configfs configfs $R/sys/kernel/config
mkdir -p $R/cairn
if [ -b /dev/vdb ]; then mount -t ext4 /dev/vdb $R/cairn || echo "GUEST-FAILED: cannot mount /dev/vdb"; fi
echo "GUEST-READY uptime=$(cut -d' ' -f1 /proc/uptime)s memavail=$(awk '/MemAvailable/{print $2}' /proc/meminfo)kB"
# run-guest.sh cmd frames each command's output with markers: no echo, no prompt
stty -F /dev/ttyS0 -echo
while true; do
  setsid cttyhack chroot $R /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/cairn \
    HOME=/root TERM=dumb PS1= PS2= /bin/sh -i < /dev/ttyS0 > /dev/ttyS0 2>&1
  sleep 1
done
