// Call fingerprints: every collective tells each peer what it was called with, so that ranks that
// disagree (f32 against i32 of the same byte size, sum against max, a skipped call) fail with an
// error naming the field and both ranks' values instead of returning wrong numbers.
//
// The fingerprint travels with the first message of a call to each peer, never as a round of its
// own: a first message of at most kInlineBytes is sent with the fingerprint in front of it (one
// copy into a staging slot on each side, which keeps an 8-byte allreduce one message per pair);
// a longer one is preceded by a fingerprint-only message (over TCP that costs 8-30 us a call on
// the development VM: docs/BENCHMARKS.md, "Call fingerprints").
// Both sides decide the same way as long as the message lengths agree; when they do not, the
// transport's own length check fails the call, naming both lengths.
//
// The receiver compares on completion and fails the call; the collective's failure path then
// aborts the transport, so the peers fail with the same cause. A mismatch is found by the ranks
// that receive from a disagreeing rank in that call; the others fail on the abort, at the latest
// in their next call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/transport.h"

namespace hoop::collectives {

/// What every rank must pass alike to one collective (fields that do not apply stay unset).
struct CallFingerprint {
  Collective kind = Collective::kBarrier;
  std::optional<DataType> dtype = std::nullopt;
  std::optional<ReduceOp> op = std::nullopt;
  std::optional<Algorithm> algorithm = std::nullopt;
  std::optional<std::int32_t> root = std::nullopt;
  /// The element count every rank passes (allgatherv: the total).
  std::optional<std::uint64_t> count = std::nullopt;
  /// A hash of per-rank counts every rank passes alike (allgatherv); unset: not compared.
  std::optional<std::uint32_t> counts_hash = std::nullopt;
  /// The call runs on device buffers (NCCL, transports/cuda), where the host path would read
  /// them as host memory.
  bool device = false;
};

/// Bytes of an encoded fingerprint with its call number.
inline constexpr std::size_t kFingerprintBytes = 32;
/// Writes `fp` of call number `seq` into `out` (kFingerprintBytes).
void encode_fingerprint(const CallFingerprint& fp, std::uint64_t seq, std::byte* out);
/// A 64-bit hash of an encoded fingerprint (the same on every rank): equal fingerprints give equal
/// hashes, and different ones almost never do.
std::uint64_t fingerprint_hash(const std::byte* encoded);
/// Compares rank `me`'s encoded fingerprint `mine` with `peer`'s `theirs`: ok when they agree,
/// else mismatch_error naming each field that differs with both ranks' values.
Status compare_fingerprints(const std::byte* mine, const std::byte* theirs, int me, int peer);

/// A hash of `counts` for CallFingerprint::counts_hash.
std::uint32_t hash_counts(std::span<const std::size_t> counts);

/// A communicator's state for fingerprints across calls: the call number and staging memory.
class CallCheck {
 public:
  /// A first message up to this many bytes travels behind its fingerprint in one message.
  static constexpr std::size_t kInlineBytes = (std::size_t{16} << 10) - 32;

  CallCheck();
  ~CallCheck();

  /// For a call that sends nothing of its own on `base` (a device call on NCCL or over
  /// transports/cuda): sends `fp` with the next call number to every peer, receives each peer's
  /// and compares them by `deadline`. Every rank sees every fingerprint, so a mismatch fails the
  /// call on every rank, naming the field, before any rank enqueues device work that would wait.
  Status exchange(Transport& base, const CallFingerprint& fp, Deadline deadline);

 private:
  friend class CheckedTransport;
  // A request whose completion needs more than the base's: a separate header message, or the
  // copy of an inline payload out of its staging slot and the comparison of the fingerprints.
  struct Action;
  std::uint64_t seq_ = 0;
  // Per peer: the call number of the last call that sent / received its first message.
  std::vector<std::uint64_t> sent_in_;
  std::vector<std::uint64_t> recvd_in_;
  // Per peer: two staging slots (send, receive) of header + kInlineBytes, made on first use.
  std::vector<std::unique_ptr<std::byte[]>> staging_;
  std::vector<Action> actions_;
  std::vector<RequestId> ids_;
};

/// One call's view of a transport that adds the fingerprint to the first message to and from
/// each peer and checks what arrives. Requests are the base's; not thread-safe.
class CheckedTransport final : public Transport {
 public:
  /// Starts call number `state`'s next with `fingerprint` over `base`.
  CheckedTransport(Transport& base, CallCheck& state, const CallFingerprint& fingerprint);

  std::string_view name() const override { return base_.name(); }
  int rank() const override { return base_.rank(); }
  int size() const override { return base_.size(); }
  bool accepts_device_memory() const override { return base_.accepts_device_memory(); }
  Result<RequestId> send(int peer, const void* data, std::size_t bytes) override {
    return post_send(peer, data, bytes, &Transport::send);
  }
  Result<RequestId> send_lent(int peer, const void* data, std::size_t bytes) override {
    return post_send(peer, data, bytes, &Transport::send_lent);
  }
  Result<RequestId> send_awaited(int peer, const void* data, std::size_t bytes) override {
    return post_send(peer, data, bytes, &Transport::send_awaited);
  }
  Result<RequestId> recv(int peer, void* data, std::size_t bytes) override;
  Status wait(std::span<const RequestId> ids, Deadline deadline) override;
  Result<bool> test(RequestId id) override;
  void poll(std::chrono::microseconds timeout) override { base_.poll(timeout); }
  void wake() override { base_.wake(); }
  bool await_activity(std::chrono::microseconds timeout, bool messages) override {
    return base_.await_activity(timeout, messages);
  }
  void abort(const Status& cause) override { base_.abort(cause); }

 private:
  /// send(), send_lent() and send_awaited() (`how`, the base's): the call's header in front of
  /// the first message to each peer.
  using Post = Result<RequestId> (Transport::*)(int, const void*, std::size_t);
  Result<RequestId> post_send(int peer, const void* data, std::size_t bytes, Post how);
  std::byte* slot(int peer, int which);
  /// Finishes the action of a completed request `id` (copy out, compare); ok when it has none.
  Status finish(RequestId id);
  /// `s`, with a word on the call header when it is a length mismatch of a first message.
  Status explain(Status s) const;

  Transport& base_;
  CallCheck& state_;
  std::uint64_t seq_;
  std::byte header_[32];
};

}  // namespace hoop::collectives
