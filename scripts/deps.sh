#!/usr/bin/env bash
# Installs what Cairn's demo and tests need on a Debian 12 machine, only
# what is missing. Usage: scripts/deps.sh [demo|test|bench]
set -euo pipefail
what=${1:-test}
pkgs=(libnbd-bin fio qemu-utils iproute2 python3)
case $what in
test) pkgs+=(nbdkit qemu-system-x86 libiscsi-bin libiscsi-dev gcc file busybox-static cpio kmod xz-utils e2fsprogs debootstrap
	nftables iptables bc jq curl openssl packer parted fdisk dosfstools mtools openssh-client socat) ;;
bench) pkgs+=(nbdkit gnuplot-nox ceph-mon ceph-osd ceph-mgr ceph-common uuid-runtime libiscsi-bin libiscsi-dev
	qemu-system-x86 busybox-static cpio kmod xz-utils e2fsprogs debootstrap gcc socat) ;;
esac
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "installing: ${missing[*]}"
	SUDO=""
	[ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v go >/dev/null || { echo "Go is not installed: install Go 1.26 (https://go.dev/dl) and re-run"; exit 1; }
