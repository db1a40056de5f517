#!/bin/sh
# The .deb on a fresh Debian: debootstrap a minimal system of this host's release, then, inside
# it as root, `apt install ./hoop_*.deb` (apt fetches the declared dependencies), an allreduce
# sweep on 2 ranks under the installed hooprun, and, with the packages the .deb suggests, a
# find_package(hoop) project and a pkg-config compile, each run on 2 ranks.
# `fresh_debian.sh SOURCE_DIR DEB WORK_DIR`; exit 77 (skipped) when the Debian mirror cannot be
# reached. HOOP_DEBIAN_MIRROR overrides the mirror (default http://deb.debian.org/debian).
set -eu
src=$1
deb=$2
work=$3
mirror=${HOOP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
host=$(echo "$mirror" | sed -E 's|^[a-z]+://([^/:]+).*|\1|')
getent hosts "$host" >/dev/null || { echo "SKIP: $host does not resolve (no network)"; exit 77; }
[ -f "$deb" ] || { echo "FAIL: no package at $deb (install.deb makes it)"; exit 1; }
. /etc/os-release
root=$work/root
cleanup() {
  umount "$root/dev/shm" 2>/dev/null || true
  umount "$root/proc" 2>/dev/null || true
  rm -rf "$work"
}
cleanup
mkdir -p "$work"
trap cleanup EXIT

debootstrap --variant=minbase "$VERSION_CODENAME" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { tail -20 "$work/debootstrap.log"; echo "FAIL: debootstrap $VERSION_CODENAME from $mirror"; exit 1; }
echo "debootstrap: a minimal Debian $VERSION_CODENAME in $root"
mount -t proc proc "$root/proc"
mount -t tmpfs tmpfs "$root/dev/shm"  # the shm transport's segments
cp "$deb" "$root/root/"
mkdir -p "$root/root/src"
cp -r "$src/tests/install" "$src/tests/downstream" "$root/root/src/"
cp /etc/resolv.conf "$root/etc/resolv.conf"

chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root /bin/sh -eu -c '
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "./root/$(basename "$1")" >/root/apt.log 2>&1 ||
  { cat /root/apt.log; echo "FAIL: apt install of the package"; exit 1; }
echo "apt install: $(grep -c "^Setting up" /root/apt.log) packages set up"
hooprun --version
out=$(hooprun -np 2 hoop-bench -b 8 -e 64K -f 8 -n 2 -w 1 -c 1 2>&1) ||
  { echo "$out"; echo "FAIL: hoop-bench under the installed hooprun"; exit 1; }
echo "$out" | grep -q "Out of bounds values : 0 OK" || { echo "$out"; echo "FAIL: wrong results"; exit 1; }
echo "hoop-bench: 2 ranks, checked, 0 wrong"
apt-get install -y -qq --no-install-recommends g++ cmake ninja-build libfmt-dev pkg-config \
  >/root/apt2.log 2>&1 || { cat /root/apt2.log; echo "FAIL: apt install of the suggested packages"; exit 1; }
cmake -S /root/src/install -B /root/app -G Ninja >/root/app.log 2>&1 &&
  cmake --build /root/app >>/root/app.log 2>&1 ||
  { cat /root/app.log; echo "FAIL: a find_package(hoop) project against the package"; exit 1; }
g++ -std=c++20 /root/src/downstream/main.cc $(pkg-config --cflags --libs hoop) -o /root/pc
for program in /root/app/installed_allreduce /root/pc; do
  out=$(hooprun -np 2 "$program")
  echo "$out"
  for r in 0 1; do
    echo "$out" | grep -q "rank $r of 2: allreduce ok (3)" || { echo "FAIL: $program, rank $r"; exit 1; }
  done
done
' fresh "$deb"
echo "fresh debian: ok"
