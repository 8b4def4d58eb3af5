#!/bin/bash
# 10-base.sh — OS hardening and services common to every Cairn SVM (Debian 12, Rocky 9).
# Runs as root inside the build VM. Files come from packer/files, uploaded to $FILES.
set -euo pipefail
FILES=${FILES:-/tmp/files}
. /etc/os-release
echo "== 10-base on $PRETTY_NAME"

case "$ID" in
debian)
  # The Debian base disk already holds every package (make-base-debian.sh installs them
  # on the host, which is much faster than apt under TCG); install only what is missing.
  want="open-vm-tools chrony nftables targetcli-fb openssh-server sudo systemd-resolved"
  missing=$(for p in $want; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
  if [ -n "$missing" ]; then
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
  fi
  admin_groups=sudo
  ssh_unit=ssh
  ;;
rocky|centos|rhel|almalinux)
  # Kickstart's %packages installed these; systemd-networkd comes from EPEL so that
  # first boot writes the same network configuration on every OS family.
  rpm -q systemd-networkd >/dev/null || dnf -y install systemd-networkd
  systemctl disable NetworkManager.service || true
  systemctl enable systemd-networkd.service systemd-resolved.service
  ln -sf ../run/systemd/resolve/stub-resolv.conf /etc/resolv.conf
  # First boot writes NTP servers to /etc/chrony/sources.d (Debian's layout).
  mkdir -p /etc/chrony/sources.d
  grep -q '^sourcedir /etc/chrony/sources.d' /etc/chrony.conf || echo 'sourcedir /etc/chrony/sources.d' >> /etc/chrony.conf
  admin_groups=wheel
  ssh_unit=sshd
  ;;
*) echo "unsupported OS $ID" >&2; exit 1 ;;
esac

# Admin account: SSH key only (installed by first boot), no password anywhere.
id cairn >/dev/null 2>&1 || useradd -m -s /bin/bash -G "$admin_groups" -c "Cairn administrator" cairn
passwd -l cairn
passwd -l root
# The account has no password, so sudo must not ask for one.
echo 'cairn ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/cairn
chmod 0440 /etc/sudoers.d/cairn
visudo -cf /etc/sudoers.d/cairn
install -d -m 0700 -o cairn -g cairn /home/cairn/.ssh

# sshd: public keys only. Takes effect at the next boot (the build still logs in with
# the temporary build account, removed by the Packer shutdown_command).
install -m 0644 "$FILES/ssh/10-cairn.conf" /etc/ssh/sshd_config.d/10-cairn.conf
grep -q '^Include /etc/ssh/sshd_config.d/\*.conf' /etc/ssh/sshd_config || sed -i '1i Include /etc/ssh/sshd_config.d/*.conf' /etc/ssh/sshd_config
sshd -t
install -m 0644 "$FILES/systemd/cairn-ssh-hostkeys.service" /etc/systemd/system/
systemctl enable cairn-ssh-hostkeys.service "$ssh_unit"

# Firewall: closed until first boot (files/nftables.conf); `cairn firstboot` replaces
# /etc/nftables.conf with the ruleset its settings imply (appliance/internal/firewall).
install -m 0755 "$FILES/nftables.conf" /etc/nftables.conf
[ "$ID" = debian ] || { mkdir -p /etc/sysconfig; echo 'include "/etc/nftables.conf"' > /etc/sysconfig/nftables.conf; }
nft -c -f /etc/nftables.conf
systemctl enable nftables.service

# Time, VMware tools, journal.
systemctl enable chrony.service 2>/dev/null || systemctl enable chronyd.service
systemctl enable open-vm-tools.service 2>/dev/null || systemctl enable vmtoolsd.service
mkdir -p /etc/systemd/journald.conf.d
install -m 0644 "$FILES/journald.conf" /etc/systemd/journald.conf.d/cairn.conf

# Name resolution through unicast DNS only: no LLMNR/mDNS listeners on the network.
mkdir -p /etc/systemd/resolved.conf.d
printf '[Resolve]\nLLMNR=no\nMulticastDNS=no\n' > /etc/systemd/resolved.conf.d/cairn.conf

# cairn target owns the LIO configuration (it rebuilds it from the cluster state at
# start); targetcli-fb's boot-time restore of a saved config must not race it.
systemctl disable rtslib-fb-targetctl.service 2>/dev/null || systemctl disable target.service 2>/dev/null || true

# The appliance is updated by replacing the image, not by unattended apt/dnf runs.
systemctl disable --now apt-daily.timer apt-daily-upgrade.timer 2>/dev/null || true
systemctl disable --now dnf-makecache.timer 2>/dev/null || true
echo "== 10-base done"
