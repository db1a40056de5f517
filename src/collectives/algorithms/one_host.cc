#include "collectives/algorithms/one_host.h"

#include <cstring>

#include "collectives/algorithms/dispatch.h"
#include "core/reduce.h"

namespace hoop::collectives {
namespace {

// A slot read by every other rank costs each rank (size - 1) times the payload in reads from
// other cores' caches, where recursive doubling moves log2(size) payloads: past this many bytes
// read per rank the messages win (bench: docs/BENCHMARKS.md, "Shared slots").
constexpr std::size_t kReadAllBudget = std::size_t{64} << 10;

}  // namespace

SharedSlots* slots_for(CommImpl& impl, std::size_t bytes, bool read_all) {
  SharedSlots* s = impl.slots();
  if (s == nullptr || bytes > s->slot_bytes() - kSlotHeaderBytes) return nullptr;
  if (read_all && bytes * static_cast<std::size_t>(impl.size() - 1) > kReadAllBudget)
    return nullptr;
  return s;
}

Status meet_in_slots(CommImpl& impl, const CallFingerprint& fp, const void* payload,
                     std::size_t bytes, Deadline deadline) {
  SharedSlots& slots = *impl.slots();
  const std::uint64_t seq = impl.next_slot_call();
  std::byte* own = slots.own_slot(seq);
  encode_fingerprint(fp, seq, own);
  if (bytes > 0) std::memcpy(own + kSlotHeaderBytes, payload, bytes);
  slots.publish(seq);
  std::vector<const std::byte*>& at = impl.slot_payloads();
  at.resize(static_cast<std::size_t>(impl.size()));
  HOOP_RETURN_IF_ERROR(slots.gather(seq, at, deadline));
  const int me = impl.rank();
  for (int r = 0; r < impl.size(); ++r) {
    if (r != me) HOOP_RETURN_IF_ERROR(compare_fingerprints(own, at[r], me, r));
    at[r] += kSlotHeaderBytes;
  }
  return Status::success();
}

Status run_in_slots(CommImpl& impl, const CallFingerprint& fp, const void* payload,
                    std::size_t bytes, const std::function<std::string()>& what,
                    const std::function<Status(std::span<const std::byte* const>)>& body) {
  // A blocking call comes after the non-blocking ones started before it (communicator.h).
  impl.async().drain();
  const std::uint64_t call = impl.next_call();
  Status status = meet_in_slots(impl, fp, payload, bytes, Clock::now() + impl.timeout());
  if (status.ok()) status = body(impl.slot_payloads());
  if (status.ok()) return status;
  return fail_call(impl, impl.transport(), std::move(status), call, what);
}

Status allreduce_in_slots(CommImpl& impl, const AllreduceOptions& o, std::size_t bytes,
                          const std::function<std::string()>& what) {
  const CallFingerprint fp{.kind = Collective::kAllreduce, .dtype = o.dtype, .op = o.op,
                           .algorithm = Algorithm::kAuto, .count = o.count};
  const void* input = o.input != nullptr ? o.input : o.output;
  return run_in_slots(impl, fp, input, bytes, what, [&](std::span<const std::byte* const> in) {
    if (bytes == 0) return Status::success();
    // In rank order on every rank: the same sums in the same order, the same bits everywhere.
    HOOP_RETURN_IF_ERROR(reduce(o.output, in[0], in[1], o.count, o.dtype, o.op));
    for (std::size_t r = 2; r < in.size(); ++r)
      HOOP_RETURN_IF_ERROR(reduce_into(o.output, in[r], o.count, o.dtype, o.op));
    if (o.op == ReduceOp::kAvg)
      return divide(o.output, o.count, o.dtype, static_cast<std::int64_t>(in.size()));
    return Status::success();
  });
}

Status broadcast_in_slots(CommImpl& impl, const BroadcastOptions& o, std::size_t bytes,
                          const std::function<std::string()>& what) {
  const CallFingerprint fp{
      .kind = Collective::kBroadcast, .dtype = o.dtype, .root = o.root, .count = o.count};
  const bool root = impl.rank() == o.root;
  return run_in_slots(impl, fp, o.buffer, root ? bytes : 0, what,
                      [&](std::span<const std::byte* const> in) {
                        if (!root && bytes > 0) std::memcpy(o.buffer, in[o.root], bytes);
                        return Status::success();
                      });
}

Status allgather_in_slots(CommImpl& impl, const AllgatherOptions& o, std::size_t block,
                          const std::function<std::string()>& what) {
  const CallFingerprint fp{.kind = Collective::kAllgather, .dtype = o.dtype, .count = o.count};
  auto* out = static_cast<std::byte*>(o.output);
  // In place, this rank's block is in the output already.
  const void* mine = o.input != nullptr ? o.input : out + block * impl.rank();
  return run_in_slots(impl, fp, mine, block, what, [&](std::span<const std::byte* const> in) {
    if (block == 0) return Status::success();
    for (std::size_t r = 0; r < in.size(); ++r) std::memmove(out + block * r, in[r], block);
    return Status::success();
  });
}

Status barrier_in_slots(CommImpl& impl) {
  return run_in_slots(
      impl, CallFingerprint{.kind = Collective::kBarrier}, nullptr, 0,
      [] { return std::string("barrier"); },
      [](std::span<const std::byte* const>) { return Status::success(); });
}

}  // namespace hoop::collectives
