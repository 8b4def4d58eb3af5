#!/usr/bin/env bash
# Installs what a Cairn make target needs on a Debian 12 machine: only what is
# missing, saying what it installs; a second run with everything present
# takes well under a second and installs nothing.
#
#   scripts/deps.sh SUITE...    suites: demo go integration plugin packer chaos
#                               e2e lio appliance bench ui installer ansible
#                               ansible-roles qos security fuzz test
#                               (test = everything `make test` runs)
#
# Every `make` target calls it for its own suite, so `make test-lio` on a
# fresh machine installs what the LIO suite needs and nothing else. When it
# cannot install (not root, no sudo), it fails with one line that names what
# is missing and the command that installs it: a suite never skips silently.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

# Debian packages per suite. Keep each list to what that suite's scripts and
# tests run (their preflight checks name the same packages).
declare -A PKGS=(
	[demo]="libnbd-bin fio qemu-utils iproute2"
	[go]="libnbd-bin fio qemu-utils nbdkit libiscsi-bin"
	[integration]="libnbd-bin fio qemu-utils jq"
	[plugin]="openssl"
	[packer]="packer"
	[chaos]="fio jq nftables iproute2 libnbd-bin"
	[e2e]="iproute2 fio util-linux nftables"
	[lio]="qemu-system-x86 qemu-utils libiscsi-bin libiscsi-dev gcc file busybox-static cpio kmod xz-utils e2fsprogs debootstrap"
	[appliance]="packer qemu-system-x86 qemu-utils debootstrap parted fdisk e2fsprogs dosfstools mtools openssh-client xz-utils genisoimage iproute2 openssl curl jq"
	[bench]="nbdkit tgt gnuplot-nox ceph-mon ceph-osd ceph-mgr ceph-common uuid-runtime libiscsi-bin libiscsi-dev qemu-system-x86 busybox-static cpio kmod xz-utils e2fsprogs debootstrap gcc qemu-utils fio libnbd-bin iproute2 nftables"
	[ui]="chromium libnbd-bin"
	[installer]="python3-venv qemu-utils openssl"
	[ansible]="python3-venv libnbd-bin etcd-client nftables iproute2"
	[ansible-roles]="python3-venv openssh-client qemu-system-x86 qemu-utils debootstrap e2fsprogs libnbd-bin"
	[qos]="fio libnbd-bin"
	[security]="jq nftables iproute2"
	[fuzz]=""
)
# Suites whose scripts read apt's package lists (apt-cache, apt-get download).
NEEDS_APT_LISTS=" lio appliance bench ansible-roles "
# The suites of `make test` (the Makefile's TEST_SUITES is the one list).
TEST_SUITES=$(make -s --no-print-directory -C "$ROOT" print-test-suites | sed 's/\btest-//g')

suites=()
for s in "${@:-test}"; do
	if [ "$s" = test ]; then
		read -r -a more <<<"$TEST_SUITES"
		suites+=("${more[@]}")
	elif [ -n "${PKGS[$s]+x}" ]; then
		suites+=("$s")
	else
		echo "deps: unknown suite '$s' (known: ${!PKGS[*]} test)" >&2
		exit 2
	fi
done

command -v go >/dev/null || {
	echo "deps: Go is not installed: install Go 1.26 (https://go.dev/dl), put it on PATH and re-run" >&2
	exit 1
}

want=() lists=0
for s in "${suites[@]}"; do
	read -r -a p <<<"${PKGS[$s]}"
	want+=("${p[@]}")
	[[ $NEEDS_APT_LISTS == *" $s "* ]] && lists=1
done
missing=()
if [ ${#want[@]} -gt 0 ]; then
	# One dpkg-query for all of them: fast when everything is installed.
	while read -r name status; do
		[ "$status" = installed ] || missing+=("$name")
	done < <(for p in $(printf '%s\n' "${want[@]}" | sort -u); do
		st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
		echo "$p ${st:-absent}"
	done)
fi
# apt-cache/apt-get download need package lists; a fresh image has none.
have_lists=1
compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null || have_lists=0

if [ ${#missing[@]} -gt 0 ] || { [ $lists = 1 ] && [ $have_lists = 0 ]; }; then
	SUDO=""
	if [ "$(id -u)" != 0 ]; then
		if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
			SUDO="sudo -n"
		else
			echo "deps: missing ${missing[*]:-apt package lists} for ${suites[*]}: run as root: apt-get update && apt-get install -y ${missing[*]:-}" >&2
			exit 1
		fi
	fi
	apt_opts=(-o DPkg::Lock::Timeout=600 -qq)
	echo "deps: apt-get update (for ${suites[*]})"
	$SUDO apt-get "${apt_opts[@]}" update
	if [ ${#missing[@]} -gt 0 ]; then
		echo "deps: installing for ${suites[*]}: ${missing[*]}"
		t0=$(date +%s)
		if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get "${apt_opts[@]}" install -y --no-install-recommends \
			"${missing[@]}" >"${TMPDIR:-/tmp}/cairn-deps-apt.log" 2>&1; then
			tail -20 "${TMPDIR:-/tmp}/cairn-deps-apt.log" >&2
			echo "deps: apt-get install ${missing[*]} failed (log above; full log ${TMPDIR:-/tmp}/cairn-deps-apt.log)" >&2
			exit 1
		fi
		echo "deps: installed ${#missing[@]} packages in $(($(date +%s) - t0)) s"
	fi
fi

# Language-level dependencies live next to their component, pinned there.
for s in "${suites[@]}"; do
	case $s in
	installer | ansible | ansible-roles) [ -x "$ROOT/scripts/pydeps.sh" ] && "$ROOT/scripts/pydeps.sh" ;;
	ui) [ -x "$ROOT/ui/scripts/deps.sh" ] && "$ROOT/ui/scripts/deps.sh" ;;
	esac
done
exit 0
