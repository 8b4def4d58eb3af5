#!/bin/bash
# Build the LIO test guest: Debian's 6.1 cloud kernel (downloaded, not installed), a busybox
# initramfs with the LIO/TCMU/virtio modules, and a Debian minbase rootfs image (targetcli-fb,
# python3-rtslib-fb, dbus) made with mkfs.ext4 -d (no loop mount, no root-only tricks beyond
# debootstrap itself).
#
# Everything is cached under ${CAIRN_CACHE:-$HOME/.cache/cairn}/lio and rebuilt only when its
# inputs change: the kernel when the package version changes, the initramfs when this script,
# guest-init.sh or the kernel change, the rootfs when this script's ROOTFS_PKGS or the mirror
# change. Prints the time of each phase.
#
# Output (in $LIO_CACHE/guest): vmlinuz, initrd.cpio.gz, rootfs.img
# Host packages: debootstrap busybox-static cpio kmod e2fsprogs xz-utils
set -euo pipefail
# HERE, LIO_CACHE
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
OUT=$LIO_CACHE/guest
KFLAVOUR=${KFLAVOUR:-cloud-amd64}
MIRROR=${MIRROR:-$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || echo http://deb.debian.org/debian)}
ROOTFS_PKGS=targetcli-fb,python3-rtslib-fb,dbus,kmod,procps,tcmu-runner
mkdir -p "$OUT" "$LIO_CACHE/debs"
TMP=$(mktemp -d "$LIO_CACHE/tmp.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
T0=$(now)

# --- 1. kernel: the exact package linux-image-$KFLAVOUR points to today
t=$(now)
KPKG=$(apt-cache depends "linux-image-$KFLAVOUR" 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
if [ -z "$KPKG" ]; then
  echo "build-guest: apt-cache knows no linux-image-$KFLAVOUR: run 'apt-get update' first" >&2; exit 1
fi
KVER=${KPKG#linux-image-}
KDIR=$LIO_CACHE/kernel-$KVER
if [ ! -f "$KDIR/.done" ]; then
  rm -rf "$KDIR"; mkdir -p "$KDIR"
  (cd "$LIO_CACHE/debs" && { ls "${KPKG}"_*.deb >/dev/null 2>&1 || apt-get download -q "$KPKG"; })
  dpkg-deb -x "$LIO_CACHE"/debs/"${KPKG}"_*.deb "$KDIR"
  find "$KDIR/lib/modules/$KVER" -name '*.ko.xz' -exec xz -d {} +
  depmod -b "$KDIR" "$KVER"
  touch "$KDIR/.done"
fi
cp "$KDIR/boot/vmlinuz-$KVER" "$OUT/vmlinuz"
echo "phase kernel ($KVER): $(elapsed "$t") s"

# --- 2. initramfs: busybox + modules + guest-init.sh
t=$(now)
IKEY=$(cat "$0" "$HERE/guest-init.sh" | sha256sum | cut -c1-16)-$KVER
if [ "$(cat "$OUT/initrd.key" 2>/dev/null)" != "$IKEY" ]; then
  R=$TMP/initrd; mkdir -p "$R"/{bin,sbin,proc,sys,dev,tmp,etc,rootfs,lib/modules/"$KVER"}
  cp "$(command -v busybox)" "$R/bin/busybox"
  file -L "$R/bin/busybox" 2>/dev/null | grep -q 'statically linked' || \
    ldd "$R/bin/busybox" 2>&1 | grep -q 'not a dynamic' || { echo "build-guest: need busybox-static" >&2; exit 1; }
  MODS="configfs target_core_mod target_core_file target_core_iblock target_core_user uio iscsi_target_mod
        virtio virtio_ring virtio_pci virtio_net virtio_blk ext4 crc32c_generic"
  KM=$KDIR/lib/modules/$KVER
  for m in $MODS; do
    for f in $(modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" | awk '/^insmod/{print $2}'); do
      rel=${f#"$KM"/}; mkdir -p "$R/lib/modules/$KVER/$(dirname "$rel")"; cp -n "$f" "$R/lib/modules/$KVER/$rel"
    done
  done
  cp "$KM"/modules.{builtin,builtin.modinfo,order} "$R/lib/modules/$KVER/" 2>/dev/null || true
  depmod -b "$R" "$KVER"
  install -m 755 "$HERE/guest-init.sh" "$R/init"
  (cd "$R" && find . | cpio -o -H newc --quiet | gzip -1 > "$OUT/initrd.cpio.gz.new")
  mv "$OUT/initrd.cpio.gz.new" "$OUT/initrd.cpio.gz"
  echo "$IKEY" > "$OUT/initrd.key"
fi
echo "phase initramfs: $(elapsed "$t") s"

# --- 3. rootfs: Debian minbase with targetcli-fb / rtslib-fb / dbus, as an ext4 image
t=$(now)
RKEY=$(echo "bookworm $ROOTFS_PKGS $MIRROR v1" | sha256sum | cut -c1-16)
if [ "$(cat "$OUT/rootfs.key" 2>/dev/null)" != "$RKEY" ]; then
  RF=$TMP/rootfs
  debootstrap --variant=minbase --include="$ROOTFS_PKGS" bookworm "$RF" "$MIRROR" > "$TMP/debootstrap.log" 2>&1 || {
    tail -20 "$TMP/debootstrap.log" >&2; echo "build-guest: debootstrap failed (log above)" >&2; exit 1; }
  rm -rf "$RF"/var/cache/apt/*.bin "$RF"/var/cache/apt/archives/*.deb "$RF"/var/lib/apt/lists/* \
         "$RF"/usr/share/doc "$RF"/usr/share/man "$RF"/usr/share/locale "$RF"/usr/share/info
  # LIO's db_root: PERSISTENT RESERVE OUT fails with NOT READY without it
  mkdir -p "$RF"/etc/target/pr "$RF"/etc/target/alua "$RF"/var/target/pr "$RF"/var/target/alua "$RF/cairn"
  rm -f "$OUT/rootfs.img.new"; truncate -s 1G "$OUT/rootfs.img.new"
  mkfs.ext4 -q -F -L cairnroot -d "$RF" "$OUT/rootfs.img.new"
  mv "$OUT/rootfs.img.new" "$OUT/rootfs.img"
  echo "$RKEY" > "$OUT/rootfs.key"
fi
echo "phase rootfs: $(elapsed "$t") s"
echo "guest built in $(elapsed "$T0") s: $OUT/{vmlinuz,initrd.cpio.gz,rootfs.img}"
