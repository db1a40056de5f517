#include "collectives/algorithms/dispatch.h"

#include <algorithm>
#include <optional>

#include "collectives/algorithms/one_host.h"
#include "collectives/algorithms/timeout_diagnosis.h"

namespace hoop::collectives {

namespace {

/// run() and run_p2p(): `fp` null for point-to-point calls, which carry no fingerprint and no
/// call number (only two ranks make them).
Status run_call(Communicator& comm, const CallFingerprint* fp,
                const std::function<std::string()>& what,
                const std::function<Status(Context&)>& body, DevicePart* part) {
  auto* impl = impl_of(comm);
  // A blocking call comes after the non-blocking ones started before it (communicator.h).
  if (impl != nullptr) impl->async().drain();
  // A Communicator implemented outside hoop gets per-call scratch (built only then: its
  // construction and destruction cost a small call's path a tenth of its instructions).
  std::optional<Scratch> local;
  Transport& base = part != nullptr ? *part->transport : comm.transport();
  const bool check = fp != nullptr && impl != nullptr && impl->call_check() != nullptr &&
                     comm.size() > 1;
  // Where the ranks share slots, the fingerprints meet there (one_host.h) instead of riding on
  // the first messages. A call over transports/cuda, whose messages are device memory, had its
  // fingerprint checked on the host before it was routed (run_on_device).
  const bool in_slots = check && part == nullptr && impl->slots() != nullptr;
  std::optional<CheckedTransport> checked;
  if (check && part == nullptr && !in_slots) checked.emplace(base, *impl->call_check(), *fp);
  Transport& transport = checked ? static_cast<Transport&>(*checked) : base;
  Context ctx{transport, comm.rank(), comm.size(), coarse_now() + comm.timeout(),
              impl != nullptr ? impl->scratch() : local.emplace()};
  if (part != nullptr) {
    ctx.device = part->device;
    ctx.stream = part->stream.handle();
  }
  if (impl != nullptr) ctx.laid_out_ring = impl->ring();
  const std::uint64_t call = fp != nullptr && impl != nullptr ? impl->next_call() : 0;
  Status status = in_slots ? meet_in_slots(*impl, *fp, nullptr, 0, ctx.deadline)
                           : Status::success();
  if (status.ok()) status = body(ctx);
  if (status.ok()) return status;
  return fail_call(comm, base, std::move(status), fp != nullptr ? call : 0, what);
}

}  // namespace

Status check_device_call(CommImpl& impl, const CallFingerprint& fp, Deadline deadline) {
  if (impl.call_check() == nullptr || impl.size() < 2) return Status::success();
  CallFingerprint device_fp = fp;
  device_fp.device = true;
  if (impl.slots() != nullptr) return meet_in_slots(impl, device_fp, nullptr, 0, deadline);
  return impl.call_check()->exchange(impl.transport(), device_fp, deadline);
}

Status fail_call(Communicator& comm, Transport& base, Status status, std::uint64_t call,
                 const std::function<std::string()>& what) {
  auto* impl = impl_of(comm);
  // Before the abort, so that the peers it reaches learn the diagnosis too.
  if (status.code() == StatusCode::kTimeout && call != 0 && impl != nullptr && comm.size() > 1) {
    const auto grace = std::clamp(comm.timeout() / 4, std::chrono::milliseconds(100),
                                  std::chrono::milliseconds(1000));
    const std::string prefix =
        (impl->key_prefix().empty() ? std::string("hoop") : impl->key_prefix()) + "/comm";
    status = Status(status.code(),
                    status.message() + diagnose_timeout(impl->info(), prefix, call, grace));
  }
  base.abort(status);
  return status.with_context(what());
}  // namespace

Status run(Communicator& comm, const CallFingerprint& fp, const std::function<std::string()>& what,
           const std::function<Status(Context&)>& body, DevicePart* part) {
  return run_call(comm, &fp, what, body, part);
}

Status run_p2p(Communicator& comm, const std::function<std::string()>& what,
               const std::function<Status(Context&)>& body, DevicePart* part) {
  return run_call(comm, nullptr, what, body, part);
}

Status copy_in(Context& ctx, void* dst, const void* src, std::size_t bytes) {
  return src != nullptr ? ctx.copy(dst, src, bytes) : Status::success();
}

void block_layout(std::span<const std::size_t> counts, std::size_t esize,
                  std::vector<std::size_t>& offsets, std::vector<std::size_t>& lengths) {
  offsets.resize(counts.size());
  lengths.resize(counts.size());
  block_layout(counts, esize, std::span<std::size_t>(offsets), std::span<std::size_t>(lengths));
}

void block_layout(std::span<const std::size_t> counts, std::size_t esize,
                  std::span<std::size_t> offsets, std::span<std::size_t> lengths) {
  std::size_t at = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    offsets[i] = at;
    lengths[i] = counts[i] * esize;
    at += lengths[i];
  }
}

}  // namespace hoop::collectives
