#!/bin/sh
# nccl-tests' command lines under hoop-bench, as ctest runs it: `nccl_flags.sh HOOPRUN HOOP_BENCH`.
# The flags that apply keep nccl-tests' meaning; those of thread and GPU layouts that do not
# fit here fail on every rank, each rank's message under its own label.
set -u
hooprun=$1
bench=$2
fail() { echo "FAIL: $*"; exit 1; }

# Every flag nccl-tests' all_reduce_perf documents, with values that apply.
out=$("$hooprun" -np 2 "$bench" -b 1K -e 4K -i 1K -n 3 -w 1 -m 2 -a 1 -c 2 -z 1 -p 1 -G 0 \
  -t 1 -T 30 -d float -o sum -r 0 2>&1) || fail "the nccl-tests flags were refused: $out"
echo "$out"
rows=$(echo "$out" | grep -cE '^\[0\] +[0-9]+ +[0-9]+ +f32')
[ "$rows" = 4 ] || fail "-b 1K -e 4K -i 1K: expected 4 sizes, got $rows"
echo "$out" | grep -q 'step: 1024(bytes)' || fail "-i: the header does not show the step"
echo "$out" | grep -q 'agg iters: 2 validation: 2' || fail "-m/-c: not in the header"
echo "$out" | grep -q 'time over ranks: mean' || fail "-a 1: not the mean"

# -r all: one row per root.
out=$("$hooprun" -np 2 "$bench" --collective reduce -b 8 -e 8 -n 1 -w 0 -r all 2>&1) ||
  fail "-r all was refused: $out"
echo "$out"
roots=$(echo "$out" | grep -E '^\[0\] +8 +2 +f32' | awk '{print $6}' | tr '\n' ' ')
[ "$roots" = "0 1 " ] || fail "-r all: expected rows for roots 0 and 1, got '$roots'"

# Layout flags that do not fit: exit 2, and every rank says why under its own label (hooprun's:
# the program adds none of its own under hooprun).
for args in "-t 2" "-G 1" "-g 2" "-d uint64"; do
  # shellcheck disable=SC2086
  out=$("$hooprun" -np 2 "$bench" -b 8 -e 8 $args 2>&1)
  rc=$?
  echo "$out"
  [ "$rc" = 2 ] || fail "$args: expected exit status 2, got $rc"
  for r in 0 1; do
    echo "$out" | grep -q "^\[$r\] hoop-bench: " ||
      fail "$args: rank $r did not report the error under its own label"
    echo "$out" | grep -q "^\[$r\] \[$r\] " && fail "$args: rank $r's label is doubled"
  done
done
echo "nccl-tests flags: ok"
