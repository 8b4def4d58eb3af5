#!/bin/bash
# make-ova.sh — qcow2 from Packer -> streamOptimized VMDK -> OVA (descriptor, SHA256
# manifest, disk; ustar, descriptor first) -> cairn-ova check.
# usage: make-ova.sh IMAGE.qcow2 OUT.ova VERSION [cairn-ova build flags...]
set -euo pipefail
IN=$1; OUT=$2; VERSION=$3; shift 3
TOOL=${CAIRN_OVA:-cairn-ova}
WORK=$(mktemp -d "$(dirname "$OUT")/.ova.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
VMDK=$WORK/cairn-svm-disk1.vmdk
# toolsversion=2147483647 marks open-vm-tools as guest-managed, so vSphere does not
# report "tools not installed" before first boot. adapter_type matches the PVSCSI
# controller of the descriptor (the VMDK's ddb.adapterType is informational).
qemu-img convert -O vmdk -o subformat=streamOptimized,adapter_type=lsilogic,toolsversion=2147483647 "$IN" "$VMDK"
"$TOOL" build -disk "$VMDK" -version "$VERSION" -out "$OUT" "$@"
"$TOOL" check "$OUT"
