#!/bin/sh
# The .deb: a build without CUDA (Debug, for the suite's time) packaged with `cpack -G DEB`;
# its contents, its declared dependencies (every system library its binaries load belongs to a
# package it depends on), and, extracted into a temporary root, a find_package(hoop) project
# built against it and run on 2 ranks under its hooprun; the package is kept at KEEP for
# fresh_debian.sh. `deb.sh SOURCE_DIR WORK_DIR KEEP`.
set -eu
src=$1
work=$2
keep=$3
rm -f "$keep"
rm -rf "$work"
mkdir -p "$work"
# -O0 without debug information and a unity build (each target's sources compiled as one unit,
# so the shared headers, torch's among them, are parsed once a target): the quickest compile,
# about half the time of one unit per file (the package is only inspected and run).
# -DCMAKE_INSTALL_PREFIX=/usr: the libraries in the multiarch directory, as the guide says.
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 \
  -DCMAKE_C_FLAGS_DEBUG=-O0 -DHOOP_CUDA=OFF -DCMAKE_INSTALL_PREFIX=/usr \
  -DHOOP_FRAMEWORKS_PYTHON= -DCMAKE_UNITY_BUILD=ON \
  -DHOOP_BUILD_TESTS=OFF -DHOOP_BUILD_EXAMPLES=OFF >"$work/configure.log" ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j "$(nproc)" >"$work/build.log" || { tail -30 "$work/build.log"; exit 1; }
(cd "$work/build" && cpack -G DEB >"$work/cpack.log") || { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$work"/build/hoop_*.deb)
echo "package: $(basename "$deb")"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
echo "Suggests: $(dpkg-deb -f "$deb" Suggests)"
# apt itself takes the file: its control fields parse and its dependencies resolve here.
apt-get install --simulate --no-install-recommends "$deb" >"$work/apt.log" 2>&1 ||
  { cat "$work/apt.log"; echo "FAIL: apt-get install --simulate rejects the package"; exit 1; }
grep -q "^Inst hoop " "$work/apt.log" || { cat "$work/apt.log"; echo "FAIL: apt would not install hoop"; exit 1; }

# A declared package may stand for the one that ships the file (libopenblas0 for
# libopenblas0-pthread, through the alternatives): its own Depends count too.
names=$(echo "$depends" | tr ',|' '\n\n' | awk '{print $1}')
covered="$depends"
for name in $names; do
  covered="$covered, $(dpkg-query -W -f='${Depends}' "$name" 2>/dev/null || true)"
done

contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
# The libraries, the CMake package and the .pc files in the multiarch directory; the Python
# package where Debian's python3 looks.
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
lib=./usr/lib/$arch
for f in ./usr/bin/hooprun ./usr/bin/hoop-topology ./usr/bin/hoop-bench ./usr/bin/hoop-plan \
  ./usr/include/hoop/hoop.h ./usr/include/hoop/version.h \
  $lib/cmake/hoop/hoopConfig.cmake $lib/pkgconfig/hoop.pc $lib/pkgconfig/hoop-c.pc \
  $lib/libhoop.so.0 $lib/libhoop_train.so.0 $lib/libhoop_c.so.0 \
  ./usr/lib/python3/dist-packages/hoop/torch/__init__.py \
  ./usr/lib/python3/dist-packages/hoop/torch/distributed.py; do
  echo "$contents" | grep -qx "$f" || { echo "FAIL: the package lacks $f"; exit 1; }
done

root=$work/root
dpkg -x "$deb" "$root"
libdir=$root/usr/lib/$arch
# Stripped: no debug information in the package's binaries.
for bin in "$libdir"/libhoop.so.0 "$root"/usr/bin/hooprun; do
  if objdump -h "$bin" | grep -q '\.debug_info'; then
    echo "FAIL: $(basename "$bin") keeps its debug information"
    exit 1
  fi
done
echo "Installed-Size: $(dpkg-deb -f "$deb" Installed-Size) KiB"
# Versioned SONAMEs.
for l in libhoop libhoop_train libhoop_c; do
  objdump -p "$libdir/$l.so.0" | grep -q "SONAME *$l.so.0" ||
    { echo "FAIL: $l has no SONAME $l.so.0"; exit 1; }
done
# Every library the binaries link directly (their NEEDED entries; what those load in turn comes
# with their own packages) must come with a declared dependency.
for bin in "$libdir"/libhoop.so.0 "$libdir"/libhoop_train.so.0 "$root"/usr/bin/hooprun; do
  resolved=$(LD_LIBRARY_PATH=$libdir ldd "$bin")
  for needed in $(objdump -p "$bin" | awk '$1 == "NEEDED" {print $2}'); do
    lib=$(echo "$resolved" | awk -v n="$needed" '$1 == n && $3 ~ /^\// {print $3}')
    [ -n "$lib" ] || { echo "FAIL: $(basename "$bin") needs $needed, which does not resolve"; exit 1; }
    case $lib in "$root"/*) continue ;; esac
    # dpkg knows a file by the path its package installed (/lib or /usr/lib, usrmerge).
    owner=$(dpkg -S "$lib" 2>/dev/null | head -n1 | cut -d: -f1)
    [ -n "$owner" ] || owner=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | head -n1 | cut -d: -f1)
    [ -n "$owner" ] || { echo "FAIL: $(basename "$bin") loads $lib, which no Debian package owns"; exit 1; }
    echo "$covered" | grep -q "\b$owner\b" ||
      { echo "FAIL: $(basename "$bin") loads $lib ($owner), not in Depends"; exit 1; }
  done
done

cmake -S "$src/tests/install" -B "$work/app" -G Ninja -DCMAKE_PREFIX_PATH="$root/usr" \
  >"$work/app.log" || { cat "$work/app.log"; exit 1; }
cmake --build "$work/app" >/dev/null
out=$(LD_LIBRARY_PATH=$libdir "$root/usr/bin/hooprun" -np 2 "$work/app/installed_allreduce")
echo "$out"
for r in 0 1; do
  echo "$out" | grep -q "rank $r of 2: allreduce ok (3)" || { echo "FAIL: rank $r"; exit 1; }
done
cp "$deb" "$keep"
rm -rf "$work"
echo "deb: ok (kept as $keep)"
