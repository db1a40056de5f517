#!/usr/bin/env bash
# The seed study replayed (Jäger and Igel, DIDL 2018): LeNet-5 on Fashion-MNIST with each
# gradient strategy (allreduce, ps, ps-async, kvstore), at each batch size per worker and
# number of workers, on the network-namespace test bed with links shaped by tc to each rate.
# Every rank is a simulated host of its own (a server too); every run trains the same epochs.
# Then bench/study_report.py writes the table, the figures and hoop-plan's predictions.
#
#   bench/study.sh [-R 1] [--rates "1gbit 10gbit"] [--batches "64 1024"] [--workers "1 2 4"]
#                  [--strategies "allreduce ps ps-async kvstore"] [--epochs 1] [--out docs/study]
#                  [--max-steps N]   (a quick try: N steps per epoch instead of the whole epoch)
#
# Needs root (ip netns, tc) and a build with the benchmarks (scripts/build): train_fashion_mnist,
# hoop-bench (the bed's latency, measured first) and hoop-plan. -R runs every configuration R
# times, interleaved; the report takes medians. Results accumulate in OUT/runs.tsv.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
bin="$root/build/bin"
reps=1
rates="1gbit 10gbit"
batches="64 1024"
workers="1 2 4"
strategies="allreduce ps ps-async kvstore"
epochs=1
out="$root/docs/study"
bed=""
declare -a cap=()
while (($#)); do
  case "$1" in
    -R) reps="$2"; shift 2 ;;
    --rates) rates="$2"; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --strategies) strategies="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --max-steps) cap=(--max-steps "$2"); shift 2 ;;
    --bed) bed="$2"; shift 2 ;;  # internal: run the configurations inside a bed of this rate
    *) echo "study.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
runs="$out/runs.tsv"

# shellcheck source=../tests/netns/bed_hosts.sh
source "$root/tests/netns/bed_hosts.sh"

# hooprun's arguments for `n` ranks, one per namespace of the bed.
hosts_for() {
  local hosts
  hosts=$(bed_hosts "$1") || exit 2
  echo "-np $1 -H $hosts --rendezvous-addr $TESTBED_BRIDGE_ADDR"
}

# The number after `label` on the line of `text` that has it.
field() { sed -n "s/.*$2 *\([0-9.]*\).*/\1/p" <<<"$1" | head -1; }

if [[ -n $bed ]]; then
  # One message's latency across two of the bed's hosts: hoop-bench's 8-byte sendrecv.
  # shellcheck disable=SC2046
  lat=$("$bin/hooprun" $(hosts_for 2) --spawner "$TESTBED_SPAWNER" "$bin/hoop-bench" \
    --collective sendrecv -b 8 -e 8 -n 500 -w 50 2>&1 | awk '$2 == 8 && $3 == 2 {print $7}')
  echo "$bed latency_us $lat" >>"$out/bed.tsv"
  echo "bed $bed: 8-byte sendrecv $lat us" >&2
  for ((rep = 1; rep <= reps; rep++)); do
    for batch in $batches; do
      for n in $workers; do
        for strategy in $strategies; do
          ranks=$n
          [[ $strategy == ps || $strategy == ps-async ]] && ranks=$((n + 1))
          # shellcheck disable=SC2046
          log=$("$bin/hooprun" $(hosts_for "$ranks") --spawner "$TESTBED_SPAWNER" \
            "$bin/train_fashion_mnist" --model lenet5 --batch-size "$batch" --epochs "$epochs" \
            --strategy "$strategy" --threads 1 --baseline-steps 0 --progress off \
            "${cap[@]}" 2>&1) ||
            { echo "$log" >&2; exit 1; }
          tput=$(field "$log" "throughput_n")
          acc=$(sed -n 's/.*test accuracy \([0-9.]*\) %.*/\1/p' <<<"$log" | tail -1)
          step=$(field "$log" "step time")
          compute=$(sed -n 's/.*; compute \([0-9.]*\) ms, waiting.*/\1/p' <<<"$log" | head -1)
          waiting=$(sed -n 's/.*waiting \([0-9.]*\) ms per step.*/\1/p' <<<"$log" | head -1)
          stale=$(sed -n 's/.*staleness (updates).*; mean \([0-9.]*\).*/\1/p' <<<"$log" | head -1)
          printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$bed" "$rep" "$batch" "$n" \
            "$strategy" "$tput" "$acc" "$step" "$compute" "$waiting" "${stale:--}" >>"$runs"
          echo "$bed rep $rep: batch $batch, $n worker(s), $strategy: $tput samples/s," \
            "accuracy $acc %, step $step ms (compute $compute)" >&2
        done
      done
    done
  done
  exit 0
fi

mkdir -p "$out"
: >"$runs"
: >"$out/bed.tsv"
max_ranks=0
for n in $workers; do ((n + 1 > max_ranks)) && max_ranks=$((n + 1)); done
for rate in $rates; do
  # The smallest bucket, so that every message crosses at the link's rate (testbed.sh --burst).
  "$root/tests/netns/testbed.sh" --hosts "$max_ranks" --rate "$rate" --burst 65536 \
    --timeout 7200 -- \
    "$0" --bed "$rate" -R "$reps" --batches "$batches" --workers "$workers" \
    --strategies "$strategies" --epochs "$epochs" --out "$out" "${cap[@]}"
done
/usr/bin/python3 "$here/study_report.py" --plan "$bin/hoop-plan" "$out"
