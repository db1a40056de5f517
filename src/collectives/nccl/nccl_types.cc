#include "collectives/nccl/nccl_types.h"

#include <fmt/format.h>

#include <string>

namespace hoop::nccl {

Result<ncclDataType_t> to_nccl_dtype(DataType dtype) {
  switch (dtype) {
    case DataType::kU8:
      return ncclUint8;
    case DataType::kI8:
      return ncclInt8;
    case DataType::kI32:
      return ncclInt32;
    case DataType::kI64:
      return ncclInt64;
    case DataType::kF16:
      return ncclFloat16;
    case DataType::kBF16:
      return ncclBfloat16;
    case DataType::kF32:
      return ncclFloat32;
    case DataType::kF64:
      return ncclFloat64;
    case DataType::kI16:
      // device_route.cc routes i16 reductions elsewhere; this is a direct caller's mistake.
      return invalid_argument(
          "nccl: NCCL has no 16-bit integer type to reduce (the device path routes i16 "
          "reductions to CUDA IPC or staging)");
  }
  return invalid_argument(
      fmt::format("nccl: no NCCL datatype for dtype value {}", static_cast<int>(dtype)));
}

Result<ncclDataType_t> to_nccl_carrier(DataType dtype) {
  if (dtype == DataType::kI16) return ncclFloat16;
  return to_nccl_dtype(dtype);
}

Result<NcclOp> to_nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return NcclOp{ncclSum, false};
    case ReduceOp::kAvg:
      return NcclOp{ncclSum, true};
    case ReduceOp::kMin:
      return NcclOp{ncclMin, false};
    case ReduceOp::kMax:
      return NcclOp{ncclMax, false};
    case ReduceOp::kProd:
      return NcclOp{ncclProd, false};
    case ReduceOp::kAdasum:
      return invalid_argument("nccl: NCCL has no adasum (hoop runs it through host copies)");
  }
  return invalid_argument(
      fmt::format("nccl: no NCCL reduction for op value {}", static_cast<int>(op)));
}

Status nccl_status(ncclResult_t result, std::string_view call, int rank, ncclComm_t comm) {
  if (result == ncclSuccess) return Status::success();
  const char* last = ncclGetLastError(comm);
  std::string message =
      fmt::format("{} failed on rank {}: {}", call, rank, ncclGetErrorString(result));
  if (last != nullptr && last[0] != '\0') message += fmt::format(" ({})", last);
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return invalid_argument(std::move(message));
    case ncclRemoteError:
      return peer_lost(std::move(message));
    case ncclInternalError:
      return internal_error(std::move(message));
    default:
      return io_error(std::move(message));
  }
}

}  // namespace hoop::nccl
