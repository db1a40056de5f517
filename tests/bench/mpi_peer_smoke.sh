#!/bin/sh
# One collective of peer_mpi_allreduce as ctest runs it: `mpi_peer_smoke.sh PEER COLLECTIVE
# [FLAGS...]`, a checked 2-rank sweep over Open MPI's TCP transport with every dtype and op (those
# MPI lacks are skipped with a note in the table); a nonzero #wrong exits 3 and fails the test.
# Skipped (exit 77) where mpirun or the peer is missing: the peer is benchmark-only, built by
# scripts/build (target `benchmarks`), not by scripts/test.
set -u
peer=$1
collective=$2
shift 2
[ -x "$peer" ] || { echo "skipped: $peer is not built (scripts/build builds it)"; exit 77; }
command -v mpirun >/dev/null 2>&1 || { echo "skipped: no mpirun"; exit 77; }
as_root=""
[ "$(id -u)" = 0 ] && as_root=--allow-run-as-root
# shellcheck disable=SC2086  # as_root is empty or one word
exec mpirun $as_root --oversubscribe -np 2 --mca pml ob1 --mca btl self,tcp "$peer" \
  --collective "$collective" -b 8 -e 64K -f 4 -n 2 -w 1 -c 1 -d all -o all "$@"
