// allreduce_list: a list of host buffers reduced as their concatenation. On one host whose
// ranks read each other's memory the single-copy allreduce reads the buffers where they lie
// (what a framework's fusion would otherwise copy into one buffer and out again); elsewhere
// they go through one buffer, so every rank of a call takes the path allreduce takes for the
// same total, whichever form each rank calls.
#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "collectives/algorithms/one_host.h"
#include "collectives/algorithms/trace.h"
#include "collectives/algorithms/validate.h"

namespace hoop {
namespace {

collectives::CommImpl* reading_comm(Communicator& comm, std::size_t bytes) {
  auto* impl = collectives::in_slots(comm, 0, false, {});
  if (impl == nullptr || collectives::slots_for(*impl, bytes, true) != nullptr ||
      !collectives::reads_take_allreduce(*impl, bytes))
    return nullptr;
  return impl;
}

}  // namespace

bool allreduce_list_reads(Communicator& comm, std::size_t bytes) {
  return reading_comm(comm, bytes) != nullptr;
}

Status allreduce_list(Communicator& comm, const AllreduceListOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_RETURN_IF_ERROR(o.op == ReduceOp::kAdasum
                           ? collectives::check_adasum(o.dtype, Algorithm::kAuto)
                           : collectives::check_op(o.op));
  std::size_t count = 0;
  // A runtime step passes hundreds of buffers: a buffer's name is formatted only for its error.
  for (std::size_t i = 0; i < o.buffers.size(); ++i) {
    const AllreduceBuffer& b = o.buffers[i];
    if (b.output == nullptr && b.count > 0)
      return collectives::check_buffer(b.output, b.count, fmt::format("buffers[{}].output", i));
    HOOP_ASSIGN_OR_RETURN(const int device, collectives::buffers_device(
                                                {{b.input, "input"}, {b.output, "output"}}));
    if (device != kCpuDevice)
      return invalid_argument(fmt::format(
          "allreduce_list: buffers[{}] is device memory; the list takes host buffers", i));
    if (b.count > std::numeric_limits<std::size_t>::max() - count)
      return invalid_argument("allreduce_list: the buffers' counts overflow");
    count += b.count;
  }
  HOOP_ASSIGN_OR_RETURN(std::size_t bytes, collectives::checked_bytes(count, 1, o.dtype, "count"));
  if (o.op != ReduceOp::kAdasum) {
    if (auto* impl = reading_comm(comm, bytes)) {
      collectives::Trace trace(comm, Collective::kAllreduce, bytes, /*deferred=*/true);
      trace.start("single-copy reads");
      return collectives::allreduce_by_reading(*impl, o.buffers, count, o.dtype, o.op, [&] {
        return fmt::format("allreduce of {} {} ({}) in {} buffers", count, dtype_name(o.dtype),
                           op_name(o.op), o.buffers.size());
      });
    }
  }
  // One buffer of the total, in place: the call every rank of a fused response makes.
  const std::size_t es = dtype_size(o.dtype);
  std::vector<std::byte> whole(bytes);
  std::size_t at = 0;
  for (const AllreduceBuffer& b : o.buffers) {
    if (b.count > 0)
      std::memcpy(whole.data() + at, b.input != nullptr ? b.input : b.output, b.count * es);
    at += b.count * es;
  }
  AllreduceOptions a;
  a.output = whole.data();
  a.count = count;
  a.dtype = o.dtype;
  a.op = o.op;
  HOOP_RETURN_IF_ERROR(allreduce(comm, a));
  at = 0;
  for (const AllreduceBuffer& b : o.buffers) {
    if (b.count > 0) std::memcpy(b.output, whole.data() + at, b.count * es);
    at += b.count * es;
  }
  return Status::success();
}

}  // namespace hoop
