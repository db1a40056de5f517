#!/bin/sh
# Every program a user runs answers --help with its options (exit 0) and an unknown option with
# a usage error (exit 2), alike: hooprun, hoop-bench, hoop-topology, hoop-plan, the examples and
# the benchmark programs that are built. `usage_errors.sh BIN_DIR`.
set -u
bin=$1
fail=0
for prog in hooprun hoop-bench hoop-topology hoop-plan hello train_fashion_mnist bench_runtime \
            tcp_bound allreduce_c bench_reduce bench_device_reduce; do
  [ -x "$bin/$prog" ] || continue  # benchmark programs are built by the benchmarks target only
  help=$("$bin/$prog" --help 2>&1)
  rc=$?
  if [ "$rc" != 0 ] || ! echo "$help" | grep -qi "usage\|options"; then
    echo "FAIL: $prog --help exits $rc or shows no usage: $help"
    fail=1
  fi
  "$bin/$prog" --no-such-option >/dev/null 2>&1
  rc=$?
  if [ "$rc" != 2 ]; then
    echo "FAIL: $prog --no-such-option exits $rc, not 2"
    fail=1
  fi
done
[ "$fail" = 0 ] && echo "usage errors: ok"
exit "$fail"
