// What every public collective does around its algorithm (collectives.cc, rooted.cc): run it
// under the communicator's deadline with call fingerprints, abort the transport on failure so
// every peer fails with the same cause, and route device buffers to a backend, to
// transports/cuda or through host copies.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "collectives/algorithms/call_check.h"
#include "collectives/algorithms/comm_impl.h"
#include "collectives/algorithms/context.h"
#include "collectives/algorithms/device_path.h"
#include "core/coarse_clock.h"
#include "hoop/communicator.h"

namespace hoop::collectives {

/// Runs `body` with a context for `comm` (over transports/cuda, on `part`'s device, when
/// given); aborts the transport and names `what` on failure. Host calls on hoop's own
/// communicator carry `fp` to every peer (call_check.h).
Status run(Communicator& comm, const CallFingerprint& fp, const std::function<std::string()>& what,
           const std::function<Status(Context&)>& body, DevicePart* part = nullptr);
/// run() for point-to-point calls: no fingerprint and no call number, which every rank of a
/// collective shares and a pair of ranks does not.
Status run_p2p(Communicator& comm, const std::function<std::string()>& what,
               const std::function<Status(Context&)>& body, DevicePart* part = nullptr);

/// Checks device call `fp` with every peer on the host before any device work of it is
/// enqueued (NCCL, transports/cuda, whose messages cannot carry it), or its host copies are
/// made: in the
/// shared slots on one host, else one fingerprint message to and from each peer
/// (CallCheck::exchange). Every rank sees every fingerprint, so a mismatch fails the call on
/// every rank, naming the field, and none is left waiting on its device.
Status check_device_call(CommImpl& impl, const CallFingerprint& fp, Deadline deadline);

/// The failure path of every collective: adds the diagnosis of a timeout of call number `call`
/// (0: a point-to-point call, none), aborts `base` with the cause, so that every peer fails with
/// it, and names `what`.
Status fail_call(Communicator& comm, Transport& base, Status status, std::uint64_t call,
                 const std::function<std::string()>& what);

/// The buffers of a device call to stage through host memory: `in_bytes` at `in`, `out_bytes`
/// at `out` (run_staged keeps an input inside the output there).
struct Staged {
  const void* in = nullptr;
  std::size_t in_bytes = 0;
  void* out = nullptr;
  std::size_t out_bytes = 0;
};

/// The backend's member function for a collective's options (null: the backend lacks it).
template <typename Options>
using BackendCall = Status (DeviceBackend::*)(const Options&, void*, Deadline);

template <typename Options>
void set_buffers(Options& o, const void* in, void* out) {
  o.input = in;
  o.output = out;
}
inline void set_buffers(BroadcastOptions& o, const void*, void* out) { o.buffer = out; }
inline void set_buffers(SendOptions& o, const void* in, void*) { o.data = in; }
inline void set_buffers(RecvOptions& o, const void*, void* out) { o.data = out; }

/// For a call on device buffers: routes it (device_route.h) and runs it on the device backend,
/// as a device copy (one rank), or on host copies of the buffers (through `self`, the public
/// collective, or `staged_runner(part, deadline)` where one is given: the allreduce's chunked
/// pipeline), and returns its status; or returns nullopt when the algorithm itself is to run,
/// with `part` set when it runs on the device over transports/cuda and null for host buffers.
/// (A template parameter rather than a std::function: host calls pass here too, and must not
/// pay for building one.)
/// `fp` is the call's fingerprint, checked on the host before the call is routed (null: a
/// point-to-point call, which has none).
template <typename Options, typename StagedRunner = std::nullptr_t>
std::optional<Status> run_on_device(Communicator& comm, const Options& o, const RouteCall& call,
                                    const CallFingerprint* fp,
                                    const std::function<std::string()>& what,
                                    Status (*self)(Communicator&, const Options&),
                                    std::type_identity_t<BackendCall<Options>> backend,
                                    const Staged& staged, DevicePart*& part,
                                    const StagedRunner& staged_runner = nullptr) {
  part = nullptr;
  Result<int> device = buffers_device({{staged.in, "input"}, {staged.out, "output"}});
  if (!device.ok()) return device.status();
  if (*device == kCpuDevice) return std::nullopt;
  auto* impl = impl_of(comm);
  if (impl == nullptr)
    return invalid_argument(fmt::format(
        "{}: device buffers need a communicator built by Communicator::create", what()));
  impl->async().drain();  // as run() does, before the device side is touched
  // First of all, so that ranks that disagree fail before any of them gathers device facts
  // (which a rank calling on host buffers never joins) or enqueues device work.
  if (fp != nullptr) {
    Status checked = check_device_call(*impl, *fp, coarse_now() + comm.timeout());
    if (!checked.ok()) {
      comm.transport().abort(checked);
      return checked.with_context(what());
    }
  }
  Result<DevicePart*> got = impl->device(*device);
  if (!got.ok()) return got.status().with_context(what());
  Result<DeviceRoute> route = impl->route(**got, call);
  if (!route.ok()) return route.status().with_context(what());
  DevicePart& p = **got;
  const Deadline deadline = coarse_now() + comm.timeout();
  switch (*route) {
    case DeviceRoute::kTransport:
      part = &p;
      return std::nullopt;
    case DeviceRoute::kLocal:
      return run_local(p, staged.in, staged.in_bytes, staged.out, staged.out_bytes, deadline)
          .with_context(what());
    case DeviceRoute::kBackend: {
      if (backend == nullptr)
        return internal_error(
            fmt::format("{}: routed to {} without a call for it", what(), p.backend->name()));
      Status status = ((*p.backend).*backend)(o, p.stream.handle(), deadline);
      if (status.ok()) return status;
      p.backend->abort(status);
      comm.transport().abort(status);
      return status.with_context(what());
    }
    case DeviceRoute::kStaged:
      break;
  }
  if constexpr (!std::is_same_v<StagedRunner, std::nullptr_t>) return staged_runner(p, deadline);
  return run_staged(p, staged.in, staged.in_bytes, staged.out, staged.out_bytes, deadline,
                    [&](const void* in, void* out) {
                      Options h = o;
                      set_buffers(h, in, out);
                      return self(comm, h);
                    });
}

inline std::byte* bytes_of(void* p) { return static_cast<std::byte*>(p); }
inline const std::byte* bytes_of(const void* p) { return static_cast<const std::byte*>(p); }

/// Copies `bytes` from `src` to `dst` unless `src` is null (an in-place call).
Status copy_in(Context& ctx, void* dst, const void* src, std::size_t bytes);

/// Byte offsets and lengths of consecutive blocks of `counts` elements of `esize` bytes.
void block_layout(std::span<const std::size_t> counts, std::size_t esize,
                  std::vector<std::size_t>& offsets, std::vector<std::size_t>& lengths);
/// The same into `offsets` and `lengths`, which have as many entries as `counts`.
void block_layout(std::span<const std::size_t> counts, std::size_t esize,
                  std::span<std::size_t> offsets, std::span<std::size_t> lengths);

/// One size per rank, on the stack up to 64 ranks and on the heap past that, so that a small
/// call allocates nothing for them (a 2-rank scatter of 16 B made five allocations a call).
class RankSizes {
 public:
  RankSizes(std::size_t ranks, std::size_t value) : size_(ranks) {
    if (ranks > kInline) {
      heap_.assign(ranks, value);
      data_ = heap_.data();
    } else {
      std::fill_n(inline_, ranks, value);
    }
  }
  RankSizes(const RankSizes&) = delete;
  RankSizes& operator=(const RankSizes&) = delete;

  std::span<std::size_t> span() { return {data_, size_}; }
  std::span<const std::size_t> span() const { return {data_, size_}; }

 private:
  static constexpr std::size_t kInline = 64;
  std::size_t inline_[kInline];
  std::vector<std::size_t> heap_;
  std::size_t* data_ = inline_;
  std::size_t size_;
};

/// Where `ranks` blocks of `count` elements of `esize` bytes each lie (block_layout's offsets
/// and lengths), without allocating up to 64 ranks: allgather and alltoall as their v-forms.
class UniformBlocks {
 public:
  UniformBlocks(std::size_t ranks, std::size_t count, std::size_t esize)
      : offsets_(ranks, 0), lengths_(ranks, count * esize) {
    const std::span<std::size_t> offsets = offsets_.span();
    for (std::size_t r = 1; r < ranks; ++r) offsets[r] = offsets[r - 1] + count * esize;
  }
  std::span<const std::size_t> offsets() const { return offsets_.span(); }
  std::span<const std::size_t> lengths() const { return lengths_.span(); }

 private:
  RankSizes offsets_;
  RankSizes lengths_;
};

}  // namespace hoop::collectives
