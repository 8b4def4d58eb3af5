#!/bin/bash
# slim.sh — keep the SVM image small. Idempotent: run by make-base-debian.sh in the
# base chroot (native speed, cached) and again by 90-cleanup.sh (cheap when nothing is
# left to remove; the initramfs is rebuilt only if modules were removed).
set -euo pipefail
. /etc/os-release

if [ "$ID" = debian ]; then
  # No docs, man pages or foreign locales, now and for later package installs.
  mkdir -p /etc/dpkg/dpkg.cfg.d
  cat > /etc/dpkg/dpkg.cfg.d/01-cairn-slim <<'F'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
F
  find /usr/share/doc -mindepth 1 ! -name copyright ! -type d -delete 2>/dev/null || true
  rm -rf /usr/share/man/* /usr/share/info/* /usr/share/lintian/*
  find /usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
fi

# Kernel modules an SVM never loads. Storage (vmw_pvscsi, virtio, nvme, SAS/SATA HBAs
# for passthrough), network (vmxnet3, virtio) and LIO/TCMU stay.
removed=0
for k in /lib/modules/*/kernel; do
  [ -d "$k" ] || continue
  for d in sound drivers/gpu drivers/media drivers/net/wireless drivers/bluetooth net/bluetooth \
           net/wireless net/mac80211 drivers/staging drivers/iio drivers/input/joystick \
           drivers/input/touchscreen drivers/isdn drivers/net/can drivers/infiniband/hw; do
    if [ -e "$k/$d" ]; then rm -rf "${k:?}/$d"; removed=1; fi
  done
  [ "$removed" = 1 ] && depmod "$(basename "$(dirname "$k")")"
done
if [ "$removed" = 1 ]; then
  if command -v update-initramfs >/dev/null; then update-initramfs -u -k all; else dracut -f --regenerate-all; fi
fi
echo "slim: modules removed=$removed; $(du -sh /usr 2>/dev/null | cut -f1) in /usr"
