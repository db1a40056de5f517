#!/usr/bin/env bash
# Runs the peers of one collective side by side on loopback -- for allreduce the TCP bound (2
# ranks), Open MPI over TCP, Gloo ring_chunked and halving_doubling, and hoop-bench once it is
# built; for the others Open MPI and hoop-bench (plus the TCP bound for sendrecv) -- with the
# same nccl-tests flags, R times each, and prints one Markdown table per rank count with the
# MEDIAN time and busbw of every peer at every size.
#
#   bench/run_peers.sh [--collective allreduce] [-R 5] [--ranks "2 4"] [-b 8] [-e 64M] [-f 2]
#                      [--bin build/bin] [--peer 'NAME=COMMAND'] [--ratio A/B] [--in-place]
#                      [--out DIR] [--plot FIGURE.png]
#
# A peer is any command that prints the nccl-tests table and accepts its flags plus --json FILE;
# in COMMAND, {n} stands for the rank count, {bin} for the binary folder, {collective} for
# --collective. The script appends the flags and reads the JSON, so hoop-bench joins with
#   --peer 'hoop={bin}/hooprun -np {n} {bin}/hoop-bench --collective {collective} --transport tcp'
# and is added that way automatically when {bin}/hoop-bench and {bin}/hooprun exist.
#
# Repetitions are interleaved (every peer once, then every peer again) so that slow phases of a
# shared machine hit all peers alike, and every second repetition runs the peers in reverse
# order: on the 2-core development guest a fixed order biased one comparison by a fifth
# (docs/BENCHMARKS.md, "Small calls in fewer instructions, second pass"). Sizes up to --split
# use -n/-w as given; larger sizes use --large-iters/--large-warmup, which keeps a full
# 8 B .. 64 MiB sweep within minutes.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"

collective=allreduce
reps=5
ranks="2 4"
bin="$repo/build/bin"
minbytes=8
maxbytes=64M
factor=2
iters=20
warmup=5
split=1M
large_iters=5
large_warmup=1
variant=out_of_place
out=""
plot=""
declare -a extra_peers=()
declare -a ratios=()
default_peers=1

usage() {
  sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  cat <<EOF
Options:
  --collective NAME  allreduce, broadcast, allgather, reduce_scatter, alltoall, reduce, gather,
                     scatter or sendrecv (default $collective)
  -R N               repetitions per peer and rank count (default $reps)
  --ranks "N ..."    rank counts (default "$ranks")
  -b, -e, -f         min bytes, max bytes, step factor (default $minbytes, $maxbytes, $factor)
  -n, -w             iterations and warm-up for sizes <= --split (default $iters, $warmup)
  --split BYTES      sizes above this use the large settings (default $split)
  --large-iters N    iterations above --split (default $large_iters)
  --large-warmup N   warm-up above --split (default $large_warmup)
  --bin DIR          where the binaries are (default build/bin)
  --peer NAME=CMD    add a peer (repeatable); {n} = rank count, {bin} = --bin,
                     {collective} = --collective
  --only-extra       run only the --peer peers (and the TCP bound, for allreduce and sendrecv)
  --no-bound         leave the TCP bound out
  --ratio A/B        add a column: peer A's median time / peer B's (repeatable)
  --in-place         tabulate the in-place columns instead of the out-of-place ones
  --out DIR          keep the JSON reports and logs here (default: a new temporary folder)
  --plot FILE        also draw busbw and time against size with bench/plot.py (.png, .svg)
EOF
}

while (($#)); do
  case "$1" in
    --collective) collective="$2"; shift 2 ;;
    -R) reps="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    -b) minbytes="$2"; shift 2 ;;
    -e) maxbytes="$2"; shift 2 ;;
    -f) factor="$2"; shift 2 ;;
    -n) iters="$2"; shift 2 ;;
    -w) warmup="$2"; shift 2 ;;
    --split) split="$2"; shift 2 ;;
    --large-iters) large_iters="$2"; shift 2 ;;
    --large-warmup) large_warmup="$2"; shift 2 ;;
    --bin) bin="$(cd "$2" && pwd)"; shift 2 ;;
    --peer) extra_peers+=("$2"); shift 2 ;;
    --only-extra) default_peers=0; shift ;;
    --no-bound) bound=0; shift ;;
    --ratio) ratios+=(--ratio "$2"); shift 2 ;;
    --in-place) variant=in_place; shift ;;
    --out) out="$2"; shift 2 ;;
    --plot) plot="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_peers.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

# The bidirectional TCP probe bounds what 2 ranks can reach when each sends and receives the
# whole size at once: allreduce's exchange and sendrecv's ring; the other collectives move data
# one way between a pair, so it would not bound them.
case "$collective" in
  allreduce|sendrecv) bound=${bound:-1} ;;
  broadcast|allgather|reduce_scatter|alltoall|reduce|gather|scatter) bound=0 ;;
  *) echo "run_peers.sh: unknown collective $collective (see --help)" >&2; exit 2 ;;
esac

to_bytes() {  # 64M -> 67108864, as the binaries' -b/-e parse it
  local v="$1" mult=1
  case "$v" in
    *[kK]) mult=1024; v="${v%?}" ;;
    *[mM]) mult=$((1024 * 1024)); v="${v%?}" ;;
    *[gG]) mult=$((1024 * 1024 * 1024)); v="${v%?}" ;;
  esac
  echo $((v * mult))
}
split_bytes="$(to_bytes "$split")"
max_bytes="$(to_bytes "$maxbytes")"
min_bytes="$(to_bytes "$minbytes")"

# The sizes above --split start where the nccl-tests sweep from -b would next land.
large_min=""
if ((max_bytes > split_bytes)); then
  large_min="$(python3 -c "
s = float($min_bytes)
while s <= $split_bytes: s *= float('$factor')
print(int(s))")"
fi

mpirun_base=(mpirun --oversubscribe)
if [[ "$(id -u)" == 0 ]]; then mpirun_base+=(--allow-run-as-root); fi

declare -a peers=()
if ((default_peers)); then
  # Gloo's peer runs allreduce only.
  wanted=(peer_mpi_allreduce)
  if [[ "$collective" == allreduce ]]; then wanted+=(peer_gloo_allreduce); fi
  for exe in "${wanted[@]}"; do
    [[ -x "$bin/$exe" ]] || echo "run_peers.sh: $bin/$exe not built, skipping it" >&2
  done
  if [[ -x "$bin/peer_mpi_allreduce" ]]; then
    peers+=("mpi=${mpirun_base[*]} -np {n} --mca pml ob1 --mca btl self,tcp {bin}/peer_mpi_allreduce --collective {collective}")
  fi
  if [[ "$collective" == allreduce && -x "$bin/peer_gloo_allreduce" ]]; then
    peers+=("gloo_ring_chunked=${mpirun_base[*]} -np {n} {bin}/peer_gloo_allreduce --algo ring_chunked")
    peers+=("gloo_halving_doubling=${mpirun_base[*]} -np {n} {bin}/peer_gloo_allreduce --algo halving_doubling")
  fi
  if [[ -x "$bin/hoop-bench" && -x "$bin/hooprun" ]]; then
    peers+=("hoop={bin}/hooprun -np {n} {bin}/hoop-bench --collective {collective} --transport tcp")
  fi
fi
peers+=("${extra_peers[@]}")

if [[ -z "$out" ]]; then out="$(mktemp -d "${TMPDIR:-/tmp}/hoop-peers.XXXXXX")"; fi
mkdir -p "$out"
manifest="$out/manifest.tsv"
: >"$manifest"

# run LABEL N REP PART LOGFILE JSONFILE CMD... ; a failed run is logged and left out.
run_one() {
  local label="$1" n="$2" rep="$3" part="$4" log="$5" json="$6"
  shift 6
  if "$@" --json "$json" >"$log" 2>&1; then
    printf '%s\t%s\t%s\t%s\t%s\n' "$label" "$n" "$rep" "$part" "$json" >>"$manifest"
  else
    echo "run_peers.sh: $label n=$n rep $rep ($part) failed (exit $?), see $log" >&2
  fi
}

# sweep LABEL N REP CMD...: the nccl-tests sweep in up to two parts (small and large sizes).
sweep() {
  local label="$1" n="$2" rep="$3"
  shift 3
  local stem="$out/${label}_n${n}_r${rep}"
  local small_max="$maxbytes"
  if [[ -n "$large_min" ]]; then small_max="$split_bytes"; fi
  if ((min_bytes <= split_bytes)); then
    run_one "$label" "$n" "$rep" small "$stem.small.log" "$stem.small.json" \
      "$@" -b "$minbytes" -e "$small_max" -f "$factor" -n "$iters" -w "$warmup"
  fi
  if [[ -n "$large_min" ]]; then
    run_one "$label" "$n" "$rep" large "$stem.large.log" "$stem.large.json" \
      "$@" -b "$large_min" -e "$maxbytes" -f "$factor" -n "$large_iters" -w "$large_warmup"
  fi
}

echo "run_peers.sh: $collective, $reps repetitions, ranks $ranks, sizes $minbytes..$maxbytes x$factor, reports in $out" >&2
start=$SECONDS
for ((rep = 1; rep <= reps; rep++)); do
  for n in $ranks; do
    if [[ "$n" == 2 ]] && ((bound)); then
      sweep tcp_bound 2 "$rep" "$bin/tcp_bound"
    fi
    order=("${peers[@]}")
    if ((rep % 2 == 0)); then
      order=()
      for ((i = ${#peers[@]} - 1; i >= 0; i--)); do order+=("${peers[i]}"); done
    fi
    for peer in "${order[@]}"; do
      label="${peer%%=*}"
      cmd="${peer#*=}"
      cmd="${cmd//\{n\}/$n}"
      cmd="${cmd//\{bin\}/$bin}"
      cmd="${cmd//\{collective\}/$collective}"
      # The peer command is a command line given as text; word splitting is intended.
      # shellcheck disable=SC2086
      sweep "$label" "$n" "$rep" $cmd -d f32 -o sum -c 1
    done
  done
  echo "run_peers.sh: repetition $rep of $reps done after $((SECONDS - start)) s" >&2
done

python3 "$here/peers/summarize_peers.py" --variant "$variant" "${ratios[@]}" "$manifest"
if [[ -n "$plot" ]]; then
  "$here/plot.py" --variant "$variant" -o "$plot" "$manifest"
fi
echo "run_peers.sh: total $((SECONDS - start)) s; JSON reports and logs in $out" >&2
