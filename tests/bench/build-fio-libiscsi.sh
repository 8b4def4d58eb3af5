#!/bin/bash
# build-fio-libiscsi.sh DESTDIR - build fio with the libiscsi engine into DESTDIR/fio.
#
# Debian's fio (3.33) is built without libiscsi. This rebuilds the same fio
# version from Debian's source package with --enable-libiscsi. The deb-src entry
# lives in a private apt state directory under DESTDIR, so /etc/apt is not
# touched. Needs: libiscsi-dev build-essential zlib1g-dev libaio-dev (installed
# here if missing). About a minute on 2 cores.
set -euo pipefail
dest=${1:?usage: build-fio-libiscsi.sh DESTDIR}
mkdir -p "$dest"; dest=$(cd "$dest" && pwd)
src=$dest/src
rm -rf "$src"; mkdir -p "$src/parts" "$src/state/lists/partial" "$src/cache/archives/partial"
# the mirror this machine's apt already uses
mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || { echo "build-fio-libiscsi: cannot find the Debian mirror in /etc/apt; set up apt first" >&2; exit 1; }
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
  "$mirror" "$suite" > "$src/parts/debian-src.sources"
apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$src/parts"
          -o "Dir::State=$src/state" -o "Dir::Cache=$src/cache")
missing=()
for p in libiscsi-dev build-essential zlib1g-dev libaio-dev; do
  dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -q 'ok installed' || missing+=($p)
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-fio-libiscsi: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
cd "$src"
timeout 300 apt-get "${apt_opts[@]}" update -qq
timeout 300 apt-get "${apt_opts[@]}" source --download-only fio >/dev/null
tar xzf fio_*.orig.tar.gz
cd fio-3.*/
./configure --enable-libiscsi --disable-native | grep -i iscsi
nice make -j2 >/dev/null
./fio --enghelp | grep -qw libiscsi || { echo "build-fio-libiscsi: built fio lacks libiscsi" >&2; exit 1; }
cp fio "$dest/fio.new" && mv "$dest/fio.new" "$dest/fio"
cd "$dest" && rm -rf "$src"
echo "built $dest/fio ($("$dest/fio" --version), with libiscsi)"
