#!/bin/bash
# 90-cleanup.sh — shrink the image and remove everything that must be unique per SVM.
set -euo pipefail
echo "== 90-cleanup"
. /etc/os-release
rm -f /etc/systemd/network/99-build-dhcp.network   # first boot writes the real one

bash "${FILES:-/tmp/files}/slim.sh"
if [ "$ID" = debian ]; then
  apt-get clean
  rm -rf /var/lib/apt/lists/*
fi

# Per-machine identity: regenerated at first boot.
rm -f /etc/ssh/ssh_host_*
truncate -s 0 /etc/machine-id
rm -f /var/lib/dbus/machine-id /var/lib/systemd/random-seed
rm -rf /var/lib/cairn/* /etc/cairn/cairn.env /etc/cairn/join-token
find /var/log -type f -exec truncate -s 0 {} +
rm -rf /var/log/journal/* /tmp/* /var/tmp/* /root/.bash_history
# Free blocks back to the (discard=unmap) disk so the image stays small.
fstrim -av || true
echo "== 90-cleanup done; $(df -h / | tail -1)"
