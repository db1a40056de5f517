#!/bin/sh
# `cmake --install` of this build into a fresh prefix, then what a user does with it: a CMake
# project with find_package(hoop), a program compiled with pkg-config's flags, hoop.torch and
# the torch.distributed backend "hoop", each run on 2 ranks under the installed hooprun. The prefix is then moved: its hooprun and a
# program built from its hoop.pc still run (the RPATHs and hoop.pc are relative).
# `run.sh SOURCE_DIR BUILD_DIR WORK_DIR`.
set -eu
src=$1
build=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
hooprun=$prefix/bin/hooprun
"$hooprun" --version
check() {  # OUTPUT: both ranks' allreduce lines
  echo "$1"
  for r in 0 1; do
    echo "$1" | grep -q "rank $r of 2: allreduce ok (3)" || { echo "FAIL: $2: rank $r"; exit 1; }
  done
}

# find_package(hoop CONFIG) in a project that sets no C++ standard.
cmake -S "$src/tests/install" -B "$work/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  >"$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/cmake" >/dev/null
check "$("$hooprun" -np 2 "$work/cmake/installed_allreduce")" "find_package"

# pkg-config.
flags=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs hoop)
c++ -std=c++20 "$src/tests/downstream/main.cc" -o "$work/pc_allreduce" $flags
check "$("$hooprun" -np 2 "$work/pc_allreduce")" "pkg-config"

# A C program with hoop-c.pc's flags (the C ABI, libhoop_c).
cflags=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs hoop-c)
cc "$src/examples/c/allreduce.c" -o "$work/c_allreduce" $cflags
"$hooprun" -np 2 "$work/c_allreduce" >"$work/c.log" 2>&1 ||
  { cat "$work/c.log"; echo "FAIL: a C program built with hoop-c.pc"; exit 1; }
echo "hoop-c.pc: a C program ran on 2 ranks"

# The Python package, where this build has it: --check-build finds it beside the installed
# hooprun, with the adapters this build has.
if [ -d "$prefix/lib/python3/dist-packages/hoop" ]; then
  report=$("$hooprun" --check-build)
  for adapter in torch jax tensorflow keras; do
    case $adapter in
      torch) built=yes ;;
      keras) [ -d "$build/python/hoop/keras" ] && built=yes || built=no ;;
      *) [ -d "$build/python/hoop/$adapter" ] && built=yes || built=no ;;
    esac
    [ $built = no ] && continue
    echo "$report" | grep -q "\[X\] $adapter " ||
      { echo "$report"; echo "FAIL: the installed hooprun --check-build misses $adapter"; exit 1; }
  done
  out=$(PYTHONPATH=$prefix/lib/python3/dist-packages "$hooprun" -np 2 /usr/bin/python3 -c "
import torch, hoop.torch as hvd
hvd.init()
t = hvd.allreduce(torch.ones(3) * (hvd.rank() + 1), op=hvd.Sum)
print(f'rank {hvd.rank()} of {hvd.size()}: allreduce ok ({int(t[0])})')
hvd.shutdown()")
  check "$out" "hoop.torch"
  out=$(PYTHONPATH=$prefix/lib/python3/dist-packages "$hooprun" -np 2 /usr/bin/python3 -c "
import torch, torch.distributed as dist, hoop.torch
dist.init_process_group('hoop')
t = torch.ones(3) * (dist.get_rank() + 1)
dist.all_reduce(t)
print(f'rank {dist.get_rank()} of {dist.get_world_size()}: allreduce ok ({int(t[0])})')
dist.destroy_process_group()")
  check "$out" "torch.distributed backend hoop"
fi

# Moved: the tools and hoop.pc are relative to the prefix, so a moved tree still works.
mv "$prefix" "$work/moved"
flags=$(PKG_CONFIG_PATH=$work/moved/lib/pkgconfig pkg-config --cflags --libs hoop)
case $flags in *"$work/moved/"*) ;; *) echo "FAIL: hoop.pc after the move: $flags"; exit 1 ;; esac
c++ -std=c++20 "$src/tests/downstream/main.cc" -o "$work/moved_allreduce" $flags
check "$("$work/moved/bin/hooprun" -np 2 "$work/moved_allreduce")" "a moved prefix"
rm -rf "$work"
echo "install: ok"
