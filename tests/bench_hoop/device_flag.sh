#!/bin/sh
# hoop-bench -g (device buffers), as ctest runs it: `device_flag.sh HOOPRUN HOOP_BENCH MODE [NP]`.
#   without-device: where no CUDA device is usable, -g must exit 2 with an error naming why
#                   (skipped, exit 77, where a device is usable);
#   with-device:    where one is, a checked run of every collective, dtype and op on device
#                   buffers on NP ranks (default 1) must pass (skipped, exit 77, where none is).
# Whether a device is usable is what `hooprun --check-build` says of the cuda transport.
set -u
hooprun=$1
bench=$2
mode=$3
np=${4:-1}
if "$hooprun" --check-build | grep -q '\[X\] cuda '; then usable=1; else usable=0; fi

case $mode in
  without-device)
    if [ "$usable" = 1 ]; then echo "skipped: a CUDA device is usable here"; exit 77; fi
    out=$("$bench" -g -b 8 -e 8 -n 1 -w 0 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" = 2 ] || { echo "expected exit status 2, got $rc"; exit 1; }
    echo "$out" | grep -q 'no usable CUDA device: .' ||
      { echo "expected the error to name why no CUDA device is usable"; exit 1; }
    ;;
  with-device)
    if [ "$usable" = 0 ]; then echo "skipped: no usable CUDA device"; exit 77; fi
    exec "$hooprun" -np "$np" "$bench" -g --collective all -b 8 -e 64K -f 4 -n 2 -w 1 -c 1 \
      -d all -o all
    ;;
  *)
    echo "unknown mode $mode"
    exit 2
    ;;
esac
