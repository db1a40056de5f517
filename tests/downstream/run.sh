#!/bin/sh
# Builds tests/downstream (a parent project with add_subdirectory(hoop)) from scratch and runs
# its allreduce on 2 ranks under the hooprun it built. `run.sh HOOP_SOURCE_DIR WORK_DIR`.
# Debug (-O0, no debug information), without CUDA and without hoop's suite: the library and
# hooprun only, quickly (a unity build: each target's sources as one unit). First, configured without a build type: hoop's targets at -O2.
set -eu
src=$1
work=$2
rm -rf "$work" "$work.notype"
# A parent that sets no build type: hoop's own targets still build optimized (-O2, not CMake's
# flagless default), and the configure summary says so. Configured only.
cmake -S "$src/tests/downstream" -B "$work.notype" -G Ninja -DHOOP_SOURCE_DIR="$src" \
  -DHOOP_CUDA=OFF -DHOOP_FRAMEWORKS_PYTHON= >"$work.notype.log" 2>&1 ||
  { cat "$work.notype.log"; exit 1; }
grep -q "build summary (no build type set; hoop's own targets at -O2 -DNDEBUG" "$work.notype.log" ||
  { cat "$work.notype.log"; echo "FAIL: the summary does not name the flags"; exit 1; }
grep -- '-c [^"]*/src/core/reduce.cc' "$work.notype/compile_commands.json" | grep -q -- ' -O2 ' ||
  { echo "FAIL: hoop's sources build without -O2 when the parent sets no build type"; exit 1; }
rm -rf "$work.notype" "$work.notype.log"
cmake -S "$src/tests/downstream" -B "$work" -G Ninja -DHOOP_SOURCE_DIR="$src" \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DCMAKE_C_FLAGS_DEBUG=-O0 -DHOOP_CUDA=OFF \
  -DHOOP_FRAMEWORKS_PYTHON= -DCMAKE_UNITY_BUILD=ON \
  >"$work.configure.log" 2>&1 ||
  { cat "$work.configure.log"; exit 1; }
# hoop's own suite, benchmarks and examples are off inside another project.
for target in hoop_test_pch bench_runtime train_fashion_mnist; do
  if ninja -C "$work" -t targets all | grep -q "^$target:"; then
    echo "FAIL: $target is built inside a parent project"; exit 1
  fi
done
cmake --build "$work" --target downstream_allreduce hooprun -j "$(nproc)"
out=$("$work/hoop/bin/hooprun" -np 2 "$work/downstream_allreduce")
echo "$out"
echo "$out" | grep -q "rank 0 of 2: allreduce ok (3)" || { echo "FAIL: no allreduce"; exit 1; }
echo "$out" | grep -q "rank 1 of 2: allreduce ok (3)" || { echo "FAIL: no allreduce"; exit 1; }
rm -rf "$work" "$work.configure.log"
echo "downstream: ok"
