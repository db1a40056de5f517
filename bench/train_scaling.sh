#!/usr/bin/env bash
# Training throughput of build/bin/train_fashion_mnist by rank count, batch size and fusion,
# median of R runs each (runs interleaved: every configuration once, then again), printed as a
# Markdown table with speedup and scaling efficiency against 1 rank at the same batch.
#
#   bench/train_scaling.sh [-R 3] [--ranks "1 2"] [--batches "32 64 256"] [--fusion "on"]
#                          [--examples 9600] [--model lenet5] [-- extra train flags]
#
# --examples: examples per worker per run (each run trains examples/batch steps).
# --fusion "on off": off runs with HOOP_FUSION_THRESHOLD=0 (one allreduce per gradient).
# Inside tests/netns/testbed.sh (TESTBED_NS set), runs of more than one rank put one rank per
# simulated host (hooprun -H ns1:1,ns2:1,... over the bed's links); 1-rank runs stay local.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../tests/netns/bed_hosts.sh
source "$here/../tests/netns/bed_hosts.sh"
bin="$here/../build/bin"
reps=3
ranks="1 2"
batches="32 64 256"
fusion="on"
examples=9600
model=lenet5
declare -a extra=()
while (($#)); do
  case "$1" in
    -R) reps="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    --fusion) fusion="$2"; shift 2 ;;
    --examples) examples="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "train_scaling.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

declare -a hosts_args=()
wrappers=""
if [[ -n "${TESTBED_NS:-}" ]]; then
  wrappers="$(mktemp -d "${TMPDIR:-/tmp}/hoop-train.XXXXXX")"
  for ns in $TESTBED_NS; do
    printf '#!/bin/sh\nexec ip netns exec %s "$@"\n' "$ns" >"$wrappers/$ns"
    chmod +x "$wrappers/$ns"
  done
fi

# hooprun's arguments for n ranks: one per simulated host on the bed, else local.
launch_args() {
  local n=$1
  if [[ -z "$wrappers" || $n -eq 1 ]]; then
    echo "-np $n"
    return
  fi
  local hosts
  hosts=$(bed_hosts "$n") || exit 2
  echo "-np $n -H $hosts --spawner $wrappers/{host} --rendezvous-addr $TESTBED_BRIDGE_ADDR"
}

results="$(mktemp)"
trap 'rm -f "$results"; [[ -n "$wrappers" ]] && rm -rf "$wrappers"' EXIT
for ((rep = 1; rep <= reps; rep++)); do
  for batch in $batches; do
    steps=$(((examples + batch - 1) / batch))
    for n in $ranks; do
      for fuse in $fusion; do
        [[ $n -eq 1 && $fuse == off ]] && continue  # nothing to fuse on one rank
        env_fusion=()
        [[ $fuse == off ]] && env_fusion=(HOOP_FUSION_THRESHOLD=0)
        # shellcheck disable=SC2046
        out=$(env "${env_fusion[@]}" "$bin/hooprun" $(launch_args "$n") "$bin/train_fashion_mnist" \
          --model "$model" --batch-size "$batch" --max-steps "$steps" --baseline-steps 0 \
          --progress off "${extra[@]}" 2>&1) || { echo "$out" >&2; exit 1; }
        tput=$(sed -n 's/.*throughput_n *\([0-9.]*\) samples.*/\1/p' <<<"$out" | head -1)
        wait_pct=$(sed -n 's/.*waiting for gradients [0-9.]* s (\([0-9.]*\) %).*/\1/p' <<<"$out" | head -1)
        echo "$batch $n $fuse $tput $wait_pct" >>"$results"
        echo "rep $rep: batch $batch, $n rank(s), fusion $fuse: $tput samples/s, waiting $wait_pct %" >&2
      done
    done
  done
done

python3 - "$results" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    batch, n, fuse, tput, wait = line.split()
    rows.setdefault((int(batch), int(n), fuse), []).append((float(tput), float(wait)))
print("| batch per rank | ranks | fusion | samples/s (median) | speedup | efficiency | waiting % | runs |")
print("|---:|---:|---|---:|---:|---:|---:|---|")
for (batch, n, fuse), v in sorted(rows.items()):
    tput = statistics.median(t for t, _ in v)
    wait = statistics.median(w for _, w in v)
    base = rows.get((batch, 1, "on"))
    b = statistics.median(t for t, _ in base) if base else None
    speed = f"{tput / b:.2f}" if b else "-"
    eff = f"{100 * tput / b / n:.0f} %" if b else "-"
    runs = ", ".join(f"{t:.0f}" for t, _ in v)
    print(f"| {batch} | {n} | {fuse} | {tput:.0f} | {speed} | {eff} | {wait:.1f} | {runs} |")
EOF
