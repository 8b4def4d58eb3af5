#!/bin/sh
# cairn-test-seed: runs once per boot in a role-test guest, before the network and sshd.
# Reads the seed disk (ext4, /dev/vdb, made by run.sh): hostname, address (the guest's
# address on the cluster segment, eth0, CIDR) and authorized_keys.
set -eu
# The seed is the second virtio disk (run.sh fixes the PCI slots): no wait for udev.
dev=/dev/vdb
for _ in $(seq 1 100); do [ -b "$dev" ] && break; sleep 0.1; done
[ -b "$dev" ] || { echo "cairn-test-seed: no seed disk $dev" >&2; exit 1; }
mkdir -p /run/seed
mount -o ro "$dev" /run/seed
hostname "$(cat /run/seed/hostname)"
cat /run/seed/hostname >/etc/hostname
install -d -m 0700 /root/.ssh
install -m 0600 /run/seed/authorized_keys /root/.ssh/authorized_keys
mkdir -p /etc/systemd/network
printf '[Match]\nName=eth0\n[Network]\nAddress=%s\n' "$(cat /run/seed/address)" >/etc/systemd/network/10-eth0.network
if [ -f /run/seed/hosts ]; then cat /run/seed/hosts >>/etc/hosts; fi
# One ed25519 host key per guest: RSA key generation takes minutes under TCG.
[ -f /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
umount /run/seed
