#!/bin/sh
# Runs in the guest: exports a backstore as LUN 0 of its own iSCSI target in demo mode (any
# initiator, no authentication, writable) on the shared portal 0.0.0.0:3260. Raw configfs
# writes. Used by guest-fileio.sh and guest-runner.sh, the reference LUNs beside Cairn's.
# Usage: guest-export.sh IQN BACKSTORE_DIR (e.g. /sys/kernel/config/target/core/fileio_0/ref0)
set -eu
IQN=$1; B=$2
T=/sys/kernel/config/target/iscsi/$IQN/tpgt_1
mkdir -p $T/lun/lun_0
ln -s "$B" $T/lun/lun_0/"$(basename "$B")"
mkdir -p "$T/np/0.0.0.0:3260"
echo 0 > $T/attrib/authentication
echo 1 > $T/attrib/generate_node_acls
echo 1 > $T/attrib/cache_dynamic_acls
echo 0 > $T/attrib/demo_mode_write_protect
echo 1 > $T/enable
