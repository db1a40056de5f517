#!/usr/bin/env bash
# hoop's transports side by side in one run: hoop-bench's allreduce over tcp, shm, ucx with
# UCX_TLS=tcp and with UCX_TLS=posix, and mpi (ranks launched by mpirun), each as a run_peers.sh
# peer, so that repetitions interleave and the table shows the MEDIAN time and busbw of every
# transport at every size (run_peers.sh's loopback TCP bound rides along for scale at 2 ranks).
# Arguments go to run_peers.sh; the docs' table came from
#
#   bench/transports.sh -R 3 --ranks 2 -b 8 -e 64M -f 2
#
# A transport this build lacks (no UCX, no MPI) fails its runs, which run_peers.sh reports and
# leaves out of the table.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

mpirun="mpirun --oversubscribe --bind-to none"
if [[ "$(id -u)" == 0 ]]; then mpirun+=" --allow-run-as-root"; fi
bench="{bin}/hoop-bench --collective allreduce"
hooprun="{bin}/hooprun -np {n}"

exec "$here/run_peers.sh" --only-extra \
  --peer "tcp=$hooprun $bench --transport tcp" \
  --peer "shm=$hooprun $bench --transport shm" \
  --peer "ucx_tcp=env UCX_TLS=tcp $hooprun $bench --transport ucx" \
  --peer "ucx_posix=env UCX_TLS=posix $hooprun $bench --transport ucx" \
  --peer "mpi=$mpirun -np {n} $bench --transport mpi" \
  "$@"
