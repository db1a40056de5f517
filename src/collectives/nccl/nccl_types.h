// The pure part of collectives/nccl: hoop's dtypes, ops and errors in NCCL's terms. Kept apart from
// the communicator so that it is tested without a GPU.
#pragma once

#include <nccl.h>

#include <string_view>

#include "hoop/core.h"

namespace hoop::nccl {

/// NCCL's datatype for `dtype`; invalid_argument naming the value for anything that is not a
/// declared DataType.
Result<ncclDataType_t> to_nccl_dtype(DataType dtype);

/// The datatype NCCL moves `dtype`'s elements as where it only copies them (broadcast,
/// allgather, alltoall): the dtype's own, or for i16, which NCCL lacks, float16, whose two bytes
/// NCCL carries without looking at them.
Result<ncclDataType_t> to_nccl_carrier(DataType dtype);

/// How NCCL runs a hoop reduction: `op` on the device, then, when `divide` is set, the result is
/// divided by the number of ranks with hoop's own kernel.
struct NcclOp {
  ncclRedOp_t op = ncclSum;
  bool divide = false;
};

/// NCCL's reduction for `op`. kAvg is ncclSum followed by a divide rather than ncclAvg: ncclAvg
/// scales each float input by 1/n before summing, which rounds differently from hoop's host and
/// device paths (sum, then one divide), and a device allreduce must agree with a host one bit
/// for bit. invalid_argument naming the value for anything that is not a declared ReduceOp.
Result<NcclOp> to_nccl_op(ReduceOp op);

/// Ok for ncclSuccess; otherwise a status naming `call`, `rank`, NCCL's error string and its last
/// error text (`comm` may be null). The code follows the cause: invalid_argument for a bad
/// argument or usage, peer_lost for a remote error, io_error for a system or CUDA failure,
/// internal_error for NCCL's own bugs.
Status nccl_status(ncclResult_t result, std::string_view call, int rank, ncclComm_t comm);

}  // namespace hoop::nccl
