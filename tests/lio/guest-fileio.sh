#!/bin/sh
# Runs in the guest: the reference LUN, a LIO fileio backstore (sparse file on tmpfs) with
# LIO's own VAAI emulation on (CAW, XCOPY, UNMAP, WRITE SAME), exported by its own target in
# demo mode (any initiator) on the shared portal 0.0.0.0:3260 (guest-export.sh). Raw configfs
# writes: fast.
# Usage: guest-fileio.sh IQN SIZE_MiB
set -eu
IQN=$1; SIZE=$2
C=/sys/kernel/config/target
B=$C/core/fileio_0/ref0
mkdir -p $B
echo "fd_dev_name=/tmp/ref0.img,fd_dev_size=$((SIZE*1024*1024))" > $B/control
echo "lio-fileio-ref0" > $B/wwn/vpd_unit_serial
echo 1 > $B/enable
for a in emulate_caw emulate_3pc emulate_tpu emulate_tpws; do echo 1 > $B/attrib/$a; done
"$(dirname "$0")/guest-export.sh" "$IQN" $B
echo "fileio reference ready: $IQN lun 0, $SIZE MiB"
