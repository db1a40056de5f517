// `hooprun --mpi`: the ranks are started by Open MPI's mpirun instead of hooprun, with the
// flags horovodrun gives it; rank 0 then hosts the rendezvous store (see bootstrap_from_env).
#pragma once

#include <string>
#include <vector>

#include "launch/options.h"

namespace hoop::launch {

/// mpirun's command line for `options`, horovodrun's flags (horovod/runner/mpi_run.py):
/// --allow-run-as-root --tag-output -np N -H hosts -bind-to none -map-by slot -mca pml ob1
/// -mca btl ^openib, then `-x NAME` for each of `forwarded` (values never appear), then the
/// command.
std::vector<std::string> mpirun_command(const LaunchOptions& options,
                                        const std::vector<std::string>& forwarded);

/// Generates HOOP_SECRET into the environment, sets HOOP_RENDEZVOUS_ADDR (the first host)
/// when the hosts are not all this machine, prints the command line with --verbose and
/// replaces hooprun with mpirun. Returns only on failure, with the exit code (127 when
/// mpirun is not on PATH).
int run_with_mpirun(const LaunchOptions& options);

}  // namespace hoop::launch
