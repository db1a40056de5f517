#!/bin/sh
# bench/plot.py: a figure from run_peers.sh's manifest (two transports, two repetitions each,
# medians) and from labelled --json reports, checked as an image with drawn lines; and a clear
# error, exit 2, for a missing report, one that is not JSON, and rows that do not exist.
# `plot.sh SOURCE_DIR BIN_DIR`.
set -u
src=$1
bin=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

bench="$bin/hooprun -np {n} $bin/hoop-bench --collective allreduce"
"$src/bench/run_peers.sh" --only-extra --no-bound -R 2 --ranks 2 -b 8 -e 4K -f 8 -n 2 -w 1 \
  --bin "$bin" --peer "tcp=$bench --transport tcp" --peer "shm=$bench --transport shm" \
  --out "$dir/peers" --plot "$dir/peers.png" >"$dir/peers.out" 2>&1 ||
  { cat "$dir/peers.out"; fail "run_peers.sh --plot failed"; }
cat "$dir/peers.out"
for label in tcp shm; do
  grep -q "^plot.py: $label: 4 sizes, 8..4K, 2 repetitions$" "$dir/peers.out" ||
    fail "the figure has no line for $label over 4 sizes and 2 repetitions"
done

"$bin/hooprun" -np 2 "$bin/hoop-bench" -b 64 -e 64K -f 4 -n 2 -w 1 -d all -o all \
  --json "$dir/all.json" >/dev/null 2>&1 || fail "hoop-bench --json failed"
out=$("$src/bench/plot.py" -o "$dir/one.png" -d f64 --op max "mine=$dir/all.json" \
  "$dir/peers/tcp_n2_r1.small.json") || { echo "$out"; fail "plot.py on two reports failed"; }
echo "$out"
echo "$out" | grep -q "^plot.py: mine: 6 sizes, 64..64K, 1 repetitions$" || fail "no f64 max line"
echo "$out" | grep -q "^plot.py: tcp_n2_r1.small: " && fail "an f32-only report gave f64 rows"

/usr/bin/python3 - "$dir/peers.png" "$dir/one.png" <<'PY' || fail "a figure is not the image drawn"
import sys
import matplotlib.image
for path in sys.argv[1:]:
    pixels = matplotlib.image.imread(path)  # fails on anything but a PNG
    height, width = pixels.shape[:2]
    assert (width, height) == (1200, 450), f"{path}: {width}x{height}"
    # Lines in colour: pixels whose red, green and blue differ (axes and text are grey).
    rgb = pixels[..., :3]
    coloured = ((rgb.max(axis=2) - rgb.min(axis=2)) > 0.3).mean()
    assert coloured > 0.001, f"{path}: {coloured:.5f} of the pixels are coloured: no lines"
    print(f"{path}: {width}x{height}, {coloured:.4f} coloured")
PY

expect_error() {  # expect_error WHAT ARGS...: exit 2 and a message naming WHAT
  what=$1
  shift
  err=$("$src/bench/plot.py" -o "$dir/bad.png" "$@" 2>&1)
  rc=$?
  [ "$rc" = 2 ] || fail "plot.py $*: exit $rc, not 2 ($err)"
  echo "$err" | grep -qF "$what" || fail "plot.py $*: the error does not name $what: $err"
  echo "ok: $err"
}
expect_error "$dir/none.json" "$dir/none.json"
echo '{"rows": [' >"$dir/broken.json"
expect_error "$dir/broken.json is not JSON" "$dir/broken.json"
echo '{"program": "x"}' >"$dir/rowless.json"
expect_error "has no \"rows\" list" "$dir/rowless.json"
expect_error "no bf16 rows" -d bf16 "$dir/peers/manifest.tsv"
expect_error "labelled by run_peers.sh" "x=$dir/peers"
[ -e "$dir/bad.png" ] && fail "a failed plot left a figure"
echo "plot: ok"
