#!/usr/bin/env bash
# Build the Debian 12 guest the role tests boot: a debootstrap root with systemd, sshd,
# python3 (for Ansible), Debian's cloud kernel, and the packages the roles install
# (the guests have no network beyond the test's own segment, so apt can only find them
# installed; the roles still declare them). Root login by SSH key only; the key, the
# hostname and the cluster address come at boot from a small "seed" disk (see seed.sh,
# run by cairn-test-seed.service), so one cached image serves every guest and every run.
#
# Cached under ${CAIRN_CACHE:-$HOME/.cache/cairn}/ansible-guest, rebuilt only when this
# script changes: base.img (ext4, raw), vmlinuz, initrd.img. Prints the time it took.
# Host packages: debootstrap e2fsprogs.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${CAIRN_CACHE:-$HOME/.cache/cairn}/ansible-guest
MIRROR=${MIRROR:-$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || echo http://deb.debian.org/debian)}
PKGS=systemd-sysv,udev,dbus,kmod,procps,iproute2,openssh-server,python3,python3-apt,linux-image-cloud-amd64,nftables,targetcli-fb,python3-rtslib-fb,nbd-client
KEY=$(cat "$0" "$HERE/seed.sh" | sha256sum | cut -c1-16)
if [ "$(cat "$OUT/key" 2>/dev/null)" = "$KEY" ] && [ -f "$OUT/base.img" ]; then
	echo "guest image cached: $OUT"
	exit 0
fi
command -v debootstrap >/dev/null || { echo "build-guest: debootstrap missing: run scripts/deps.sh ansible-roles" >&2; exit 1; }
t0=$(date +%s)
mkdir -p "$OUT"
TMP=$(mktemp -d "$OUT/tmp.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
R=$TMP/root
echo "build-guest: debootstrap bookworm from $MIRROR (a few minutes, once)"
if ! debootstrap --variant=minbase --include="$PKGS" bookworm "$R" "$MIRROR" >"$TMP/debootstrap.log" 2>&1; then
	tail -20 "$TMP/debootstrap.log" >&2
	echo "build-guest: debootstrap failed (log above); check the mirror $MIRROR and re-run" >&2
	exit 1
fi
# Boot pieces stay outside the image: qemu loads them with -kernel/-initrd.
cp "$(ls "$R"/boot/vmlinuz-* | tail -1)" "$TMP/vmlinuz"
cp "$(ls "$R"/boot/initrd.img-* | tail -1)" "$TMP/initrd.img"
rm -rf "$R"/var/cache/apt/archives/*.deb "$R"/var/lib/apt/lists/* "$R"/usr/share/doc "$R"/usr/share/man \
	"$R"/usr/share/locale "$R"/boot/*
rm -f "$R"/etc/ssh/ssh_host_*
echo "/dev/vda / ext4 rw,relatime 0 1" >"$R/etc/fstab"
passwd -R "$R" -l root >/dev/null
install -m 0755 "$HERE/seed.sh" "$R/usr/local/sbin/cairn-test-seed"
cat >"$R/etc/systemd/system/cairn-test-seed.service" <<'UNIT'
# Test guests only: hostname, SSH key and addresses from the seed disk (LABEL=seed).
[Unit]
Description=Test guest seed (hostname, SSH key, cluster address)
DefaultDependencies=no
After=local-fs.target
Before=network-pre.target systemd-networkd.service ssh.service
Wants=network-pre.target
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/cairn-test-seed
[Install]
WantedBy=sysinit.target
UNIT
mkdir -p "$R/etc/systemd/system/sysinit.target.wants" "$R/etc/systemd/system/multi-user.target.wants"
ln -sf /etc/systemd/system/cairn-test-seed.service "$R/etc/systemd/system/sysinit.target.wants/"
ln -sf /lib/systemd/system/systemd-networkd.service "$R/etc/systemd/system/multi-user.target.wants/"
# The user network (eth1) is DHCP; eth0 gets its static address from the seed.
cat >"$R/etc/systemd/network/20-eth1.network" <<'NET'
[Match]
Name=eth1
[Network]
DHCP=ipv4
NET
# No serial getty login needed: the console only shows the boot.
ln -sf /dev/null "$R/etc/systemd/system/serial-getty@ttyS0.service"
ln -sf /dev/null "$R/etc/systemd/system/systemd-timesyncd.service"
ln -sf /dev/null "$R/etc/systemd/system/apt-daily.timer"
ln -sf /dev/null "$R/etc/systemd/system/apt-daily-upgrade.timer"
ln -sf /dev/null "$R/etc/systemd/system/e2scrub_reap.service"
ln -sf /dev/null "$R/etc/systemd/system/systemd-udev-settle.service"
rm -f "$OUT/base.img"
truncate -s 3G "$TMP/base.img"
mkfs.ext4 -q -F -L root -d "$R" "$TMP/base.img"
mv "$TMP/base.img" "$TMP/vmlinuz" "$TMP/initrd.img" "$OUT/"
echo "$KEY" >"$OUT/key"
echo "build-guest: image built in $(($(date +%s) - t0)) s: $OUT"
