#include "collectives/nccl/nccl_backend.h"

#include <fmt/format.h>
#include <nccl.h>

#include <cstdint>
#include <functional>
#include <string_view>
#include <utility>

#include "collectives/nccl/nccl_comm.h"
#include "collectives/nccl/nccl_types.h"
#include "device/device.h"

namespace hoop::nccl {
namespace {

using Issue = std::function<ncclResult_t(ncclComm_t, cudaStream_t)>;

std::byte* bytes_of(void* p) { return static_cast<std::byte*>(p); }
const std::byte* bytes_of(const void* p) { return static_cast<const std::byte*>(p); }

/// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

class NcclBackend final : public collectives::DeviceBackend {
 public:
  explicit NcclBackend(std::unique_ptr<Comm> comm) : comm_(std::move(comm)) {}

  std::string_view name() const override { return "nccl"; }

  Status allreduce(const AllreduceOptions& o, void* stream, Deadline deadline) override {
    if (o.count == 0) return usable();
    HOOP_ASSIGN_OR_RETURN(const ncclDataType_t type, to_nccl_dtype(o.dtype));
    HOOP_ASSIGN_OR_RETURN(const NcclOp op, to_nccl_op(o.op));
    const void* in = o.input != nullptr ? o.input : o.output;
    return run(
        "ncclAllReduce", stream, deadline,
        [&](ncclComm_t c, cudaStream_t s) {
          return ncclAllReduce(in, o.output, o.count, type, op.op, c, s);
        },
        [&] { return finish_avg(op, o.output, o.count, o.dtype, stream); });
  }

  Status broadcast(const BroadcastOptions& o, void* stream, Deadline deadline) override {
    if (o.count == 0) return usable();
    HOOP_ASSIGN_OR_RETURN(const ncclDataType_t type, to_nccl_carrier(o.dtype));
    return run("ncclBroadcast", stream, deadline, [&](ncclComm_t c, cudaStream_t s) {
      return ncclBroadcast(o.buffer, o.buffer, o.count, type, o.root, c, s);
    });
  }

  Status allgather(const AllgatherOptions& o, void* stream, Deadline deadline) override {
    if (o.count == 0) return usable();
    HOOP_ASSIGN_OR_RETURN(const ncclDataType_t type, to_nccl_carrier(o.dtype));
    const std::size_t block = o.count * dtype_size(o.dtype);
    std::byte* own = bytes_of(o.output) + block * comm_->rank();
    const std::byte* in = o.input != nullptr ? bytes_of(o.input) : own;
    // NCCL's in-place form has the input at this rank's block; an input elsewhere in the output
    // would be overwritten by arriving blocks, so it moves there first.
    const bool move_in = in != own && overlaps(in, block, o.output, block * comm_->size());
    const std::byte* from = move_in ? own : in;
    return run(
        "ncclAllGather", stream, deadline,
        [&](ncclComm_t c, cudaStream_t s) {
          return ncclAllGather(from, o.output, o.count, type, c, s);
        },
        nullptr,
        [&]() -> Status {
          return move_in ? device::copy(own, in, block, stream) : Status::success();
        });
  }

  Status reduce_scatter(const ReduceScatterOptions& o, void* stream, Deadline deadline) override {
    if (o.count == 0) return usable();
    HOOP_ASSIGN_OR_RETURN(const ncclDataType_t type, to_nccl_dtype(o.dtype));
    HOOP_ASSIGN_OR_RETURN(const NcclOp op, to_nccl_op(o.op));
    const std::size_t block = o.count * dtype_size(o.dtype);
    const std::size_t total = block * comm_->size();
    // hoop's in-place form (input null or the output) reads every block from the output and
    // leaves this rank's result at its start; NCCL's leaves it at this rank's block. Any other
    // overlap of input and output reduces into scratch.
    const std::byte* in = bytes_of(o.input != nullptr ? o.input : o.output);
    std::byte* out = bytes_of(o.output);
    std::byte* into = out;
    if (in == out) {
      into = out + block * comm_->rank();
    } else if (overlaps(in, total, out, block) && out != in + block * comm_->rank()) {
      HOOP_RETURN_IF_ERROR(scratch_.reserve(comm_->device(), block));
      into = scratch_.data();
    }
    return run(
        "ncclReduceScatter", stream, deadline,
        [&](ncclComm_t c, cudaStream_t s) {
          return ncclReduceScatter(in, into, o.count, type, op.op, c, s);
        },
        [&]() -> Status {
          HOOP_RETURN_IF_ERROR(finish_avg(op, into, o.count, o.dtype, stream));
          return into == out ? Status::success() : device::copy(out, into, block, stream);
        });
  }

  Status alltoall(const AlltoallOptions& o, void* stream, Deadline deadline) override {
    if (o.count == 0) return usable();
    HOOP_ASSIGN_OR_RETURN(const ncclDataType_t type, to_nccl_carrier(o.dtype));
    const std::size_t block = o.count * dtype_size(o.dtype);
    const std::size_t total = block * comm_->size();
    const std::byte* in = bytes_of(o.input != nullptr ? o.input : o.output);
    std::byte* out = bytes_of(o.output);
    // Blocks still to be sent would be overwritten by arriving ones: an input that shares
    // memory with the output (the in-place form included) is sent from a copy.
    const bool copy_first = overlaps(in, total, out, total);
    if (copy_first) HOOP_RETURN_IF_ERROR(scratch_.reserve(comm_->device(), total));
    const std::byte* from = copy_first ? scratch_.data() : in;
    return run(
        "ncclSend/ncclRecv group (alltoall)", stream, deadline,
        [&](ncclComm_t c, cudaStream_t s) {
          ncclResult_t r = ncclGroupStart();
          for (int p = 0; p < comm_->size() && r == ncclSuccess; ++p) {
            r = ncclSend(from + block * p, o.count, type, p, c, s);
            if (r == ncclSuccess) r = ncclRecv(out + block * p, o.count, type, p, c, s);
          }
          // The group is closed whatever happened inside it; the first error wins.
          const ncclResult_t ended = ncclGroupEnd();
          return r != ncclSuccess ? r : ended;
        },
        nullptr,
        [&]() -> Status {
          return copy_first ? device::copy(scratch_.data(), in, total, stream) : Status::success();
        });
  }

  void abort(const Status& cause) override {
    if (cause_.ok()) cause_ = cause.ok() ? aborted("nccl: aborted") : cause;
    comm_->abort();
  }

 private:
  /// Ok while no call has failed; afterwards the first failure's cause.
  Status usable() const {
    if (cause_.ok()) return cause_;
    return Status(cause_.code(),
                  fmt::format("nccl: the communicator was aborted by an earlier failure: {}",
                              cause_.message()));
  }

  /// Divides a kAvg result by the number of ranks, on the stream after the sum.
  Status finish_avg(const NcclOp& op, void* buf, std::size_t count, DataType dtype,
                    void* stream) const {
    return op.divide ? device::divide(buf, count, dtype, comm_->size(), stream) : Status::success();
  }

  /// Queues `before` (copies into place), the NCCL call `issue` and `after` (finishing kernels
  /// and copies) on `stream`, then waits until all of it has finished. Any failure aborts the
  /// communicator: a collective that failed on one rank may be stuck on the others.
  Status run(std::string_view call, void* stream, Deadline deadline, const Issue& issue,
             const std::function<Status()>& after = nullptr,
             const std::function<Status()>& before = nullptr) {
    HOOP_RETURN_IF_ERROR(usable());
    Status status = device::set_device(comm_->device());
    if (status.ok() && before) status = before();
    const auto s = stream != nullptr ? static_cast<cudaStream_t>(stream) : cudaStreamPerThread;
    if (status.ok()) status = comm_->queued(issue(comm_->get(), s), call, deadline);
    if (status.ok() && after) status = after();
    if (status.ok()) status = comm_->finished(stream, call, deadline);
    if (!status.ok()) abort(status);
    return status;
  }

  std::unique_ptr<Comm> comm_;
  device::Buffer scratch_;  // reduce_scatter and alltoall whose input shares the output
  Status cause_;
};

/// Registers the backend when libhoop is loaded.
struct Registrar {
  Registrar() { collectives::register_device_backend("nccl", &make_backend); }
} registrar;

}  // namespace

Result<std::unique_ptr<collectives::DeviceBackend>> make_backend(
    const collectives::DeviceBackendSetup& setup) {
  HOOP_ASSIGN_OR_RETURN(std::unique_ptr<Comm> comm, Comm::create(setup));
  return std::unique_ptr<collectives::DeviceBackend>(new NcclBackend(std::move(comm)));
}

std::string library_version() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "unknown";
  // Since NCCL 2.9 the code is major * 10000 + minor * 100 + patch.
  return fmt::format("{}.{}.{}", code / 10000, code / 100 % 100, code % 100);
}

}  // namespace hoop::nccl
