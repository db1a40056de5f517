// collectives/nccl: hoop's device backend "nccl" (see collectives/algorithms/device_path.h). Linked
// into libhoop in a build with CUDA and NCCL, where loading libhoop registers it, so that
// HOOP_GPU_BACKEND=nccl (or auto) runs the device collectives through NCCL.
//
// Semantics are the host collectives' (include/hoop/communicator.h), in-place forms included;
// where NCCL's own in-place layout differs (reduce_scatter, alltoall) the backend moves blocks
// or stages through a device scratch buffer on the same stream. kAvg is a sum followed by hoop's
// divide kernel, so results agree bit for bit with the host path. Every wait polls until the
// call's deadline; a failure or timeout aborts the NCCL communicator, and every later call fails
// with that first cause.
#pragma once

#include <memory>
#include <string>

#include "collectives/algorithms/device_path.h"

namespace hoop::nccl {

/// The backend for `setup`; called collectively by every rank (it creates the NCCL communicator,
/// see Comm::create).
Result<std::unique_ptr<collectives::DeviceBackend>> make_backend(
    const collectives::DeviceBackendSetup& setup);

/// The version of the NCCL library loaded ("2.28.3"), for `hooprun --check-build`.
std::string library_version();

}  // namespace hoop::nccl
