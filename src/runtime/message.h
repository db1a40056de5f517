// What the runtime's background threads tell each other: each rank's requests (tensors it has
// ready), in rounds, to every other rank of its process set; and what each rank's coordinator
// makes of a round, the responses (what to run, in which order), the same on every rank. Only
// request lists travel (with the data of small cached allreduces), as byte strings on the
// control connections; decoding checks every length, so a corrupt message is an error, never
// an over-read.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/core.h"

namespace hoop::runtime {

/// The collective a tensor takes part in.
enum class OpType : std::uint8_t {
  kAllreduce,
  kAllgather,
  kBroadcast,
  kAlltoall,
  kReducescatter,
  kBarrier
};

/// Lower-case name ("allreduce", ...), as in error messages and the timeline.
std::string_view op_type_name(OpType type);

/// A tensor's dimensions, outermost first, held inline up to kInline of them: a training step
/// describes hundreds of tensors, and a std::vector's allocation per description (made on the
/// submitting thread, freed on the background thread) cost a 400-tensor step about 300
/// instructions per tensor in malloc and free.
class Shape {
 public:
  static constexpr std::size_t kInline = 6;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) { assign(dims.begin(), dims.end()); }
  Shape(const std::vector<std::int64_t>& dims) {  // NOLINT: a Tensor's shape describes one
    assign(dims.begin(), dims.end());
  }
  Shape& operator=(const std::vector<std::int64_t>& dims) {
    assign(dims.begin(), dims.end());
    return *this;
  }
  Shape& operator=(std::initializer_list<std::int64_t> dims) {
    assign(dims.begin(), dims.end());
    return *this;
  }

  /// Replaces the dimensions with [first, last).
  template <typename It>
  void assign(It first, It last) {
    size_ = static_cast<std::size_t>(std::distance(first, last));
    if (size_ <= kInline) {
      std::copy(first, last, inline_.begin());
      heap_.clear();
    } else {
      heap_.assign(first, last);
    }
  }
  void push_back(std::int64_t d) {
    if (size_ < kInline) {
      inline_[size_++] = d;
      return;
    }
    if (size_ == kInline) heap_.assign(inline_.begin(), inline_.end());
    heap_.push_back(d);
    ++size_;
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::int64_t* begin() const { return size_ <= kInline ? inline_.data() : heap_.data(); }
  const std::int64_t* end() const { return begin() + size_; }
  std::int64_t* begin() { return size_ <= kInline ? inline_.data() : heap_.data(); }
  std::int64_t* end() { return begin() + size_; }
  std::int64_t operator[](std::size_t i) const { return begin()[i]; }
  std::int64_t& operator[](std::size_t i) { return begin()[i]; }
  std::int64_t front() const { return *begin(); }
  /// The dimensions as a std::vector (a Tensor's or an OwnedTensor's shape).
  std::vector<std::int64_t> vec() const { return {begin(), end()}; }

  friend bool operator==(const Shape& a, const Shape& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  std::size_t size_ = 0;
  std::array<std::int64_t, kInline> inline_{};
  std::vector<std::int64_t> heap_;  // all of them, past kInline
};

/// One rank's description of one tensor operation; every rank must send the same one (the
/// first dimension of allgather and alltoall inputs excepted).
struct Request {
  std::string name;
  OpType type = OpType::kAllreduce;
  DataType dtype = DataType::kF32;
  ReduceOp op = ReduceOp::kSum;
  Shape shape;
  std::int32_t root = -1;
  std::int32_t device = -1;  // -1: host memory; 0: CUDA device memory (each rank's own device)
  double prescale = 1.0;
  double postscale = 1.0;
  /// grouped_allreduce: the first name of the group and its size; empty / 0 otherwise.
  std::string group;
  std::uint32_t group_size = 0;

  /// The number of elements.
  std::size_t count() const {
    std::size_t n = 1;
    for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
    return n;
  }
  /// The tensor's size in bytes.
  std::size_t bytes() const { return count() * dtype_size(dtype); }
};

/// Settings every rank's coordinator must share, announced by the set's rank 0 (its own, then
/// the autotuner's): they decide how ready tensors fuse, so every rank applies them at the same
/// point of the negotiation.
struct Tuning {
  std::uint64_t fusion_threshold = 0;
  Algorithm algorithm = Algorithm::kAuto;
  /// >= 0: the background threads collect for at most this many microseconds from now on
  /// (HOOP_CYCLE_TIME_MS, as the autotuner sets it); -1: unchanged.
  std::int64_t cycle_us = -1;
  /// >= 0: the response cache's capacity (rank 0's HOOP_CACHE_CAPACITY, in its first
  /// contribution, which every rank applies before it has cached anything: slots then mean the
  /// same tensor everywhere); -1: unchanged.
  std::int64_t cache_capacity = -1;
};

/// One rank's contribution to a round of its process set's negotiation, sent to every other
/// rank of the set.
struct RequestList {
  /// Tensors submitted since its last contribution and not in the response cache.
  std::vector<Request> requests;
  /// Response-cache slots of tensors submitted since its last contribution, ascending (the order
  /// every rank's coordinator counts them in: the bit-vector encoding keeps no other).
  std::vector<std::uint32_t> cached;
  bool join = false;      // this rank has joined
  bool shutdown = false;  // this rank is shutting down
  /// Rank 0 only: settings that take effect for the tensors of this round on.
  std::optional<Tuning> tuning;
  /// Whether `carried` holds the inputs (prescaled) of the cached tensors a CarryBudget takes
  /// walking `cached` in order, in that order.
  bool carries = false;
  std::string carried;

  /// Empties the list and keeps its vectors' and string's room: the controller makes a list
  /// and decodes its peers' each round, with no allocation once they have grown (a field
  /// added to RequestList is reset here too).
  void clear() {
    requests.clear();
    cached.clear();
    join = shutdown = carries = false;
    tuning.reset();
    carried.clear();
  }
};

/// The largest tensor whose data travels in the negotiation: an allreduce of a small host
/// tensor is then reduced by each rank from the inputs its round brought, with no collective
/// after it. Cached tensors only (both sides know the description).
inline constexpr std::size_t kCarryMaxBytes = 256;
/// At most this many bytes of inputs go with one list; the small tensors past it run in
/// collectives as usual.
inline constexpr std::size_t kCarryMaxListBytes = 4096;

/// Whether a cached tensor described by `r` may travel with its data (kCarryMaxBytes): a host
/// allreduce of an element-wise op, not part of a group.
inline bool carried_in_negotiation(const Request& r) {
  return r.type == OpType::kAllreduce && r.device == kCpuDevice && r.op != ReduceOp::kAdasum &&
         r.group_size <= 1 && r.bytes() <= kCarryMaxBytes;
}

/// Which of a list's cached tensors carry their inputs: the sender and every receiver walk the
/// list's cached tensors in order through one of these, so they agree on which do.
class CarryBudget {
 public:
  /// Whether tensor `r`, the next of the list, carries its input; its bytes are then spent.
  bool take(const Request& r) {
    if (!carried_in_negotiation(r)) return false;
    if (used_ + r.bytes() > kCarryMaxListBytes) return false;
    used_ += r.bytes();
    return true;
  }
  std::size_t used() const { return used_; }

 private:
  std::size_t used_ = 0;
};

/// Response::slots of a tensor that was not named by its response-cache slot.
inline constexpr std::uint32_t kNoSlot = ~std::uint32_t{0};

/// One unit of work every rank runs in the same order.
struct Response {
  OpType type = OpType::kAllreduce;
  /// The tensors, in fusion order, fully described (every rank needs the shapes: a joined rank
  /// has no request of its own, and an allgather's first dimensions differ per rank). Shared
  /// and immutable: a cached tensor's description is the response cache's own, so that making
  /// a training step's responses copies no names and no shapes.
  std::vector<std::shared_ptr<const Request>> tensors;
  /// Empty, or one per tensor: the response-cache slot that holds exactly that description
  /// (kNoSlot: none). A slotted tensor travels as its slot and is not cached again, with no
  /// lookup of its description on either side.
  std::vector<std::uint32_t> slots;
  /// Allgather: first dimension of each tensor on each rank, tensor-major
  /// (tensors.size() x set size).
  std::vector<std::int64_t> first_dims;
  /// Ranks (in the set) that had joined when the response was made.
  std::vector<std::int32_t> joined;
  /// Non-empty: the tensors fail with this message (a mismatch) instead of running.
  std::string error;
  /// Allreduce: the algorithm every rank runs (kAuto: the communicator's choice); the
  /// autotuner sets it.
  Algorithm algorithm = Algorithm::kAuto;
  /// A lone allreduce whose every rank's input came with the round (carried_in_negotiation):
  /// `inputs` holds them, rank-major and prescaled, and each rank reduces them itself.
  bool carried = false;
  std::string inputs;

  /// Back to a default response, keeping its vectors' and strings' room (a field added to
  /// Response is reset there too).
  void clear();
};

/// A list's responses, in order. Those a clear() empties stay, with their room, for the next
/// add(): the runtime makes a list every round, and a lone tensor's round then allocates
/// nothing for its response.
class Responses {
 public:
  /// A default response at the end, made in the room of one cleared before where there is one.
  Response& add();
  /// Empties every response (their tensors' descriptions are let go now) and the list.
  void clear();
  std::size_t size() const { return used_; }
  bool empty() const { return used_ == 0; }
  Response& operator[](std::size_t i) { return all_[i]; }
  const Response& operator[](std::size_t i) const { return all_[i]; }
  Response* begin() { return all_.data(); }
  Response* end() { return all_.data() + used_; }
  const Response* begin() const { return all_.data(); }
  const Response* end() const { return all_.data() + used_; }

 private:
  std::vector<Response> all_;
  std::size_t used_ = 0;
};

/// What every rank runs after a round of negotiation, in order (the same on every rank).
struct ResponseList {
  Responses responses;
  /// Every rank has joined: their join handles finish, naming this rank as the last (-1: no).
  std::int32_t join_done_last = -1;
  /// A rank asked to shut down: the background threads stop after this list, and what the
  /// other ranks still submit fails naming `shutdown_by`, the first rank that asked (Horovod's
  /// semantics: one rank's shutdown ends the job's runtime, it never waits for the others).
  bool shutdown = false;
  std::int32_t shutdown_by = -1;

  /// Empties the list (its responses' room is kept: Responses).
  void clear();
};

/// A request list's byte encoding, into `out` (emptied first, its room kept).
void encode(const RequestList& list, std::string& out);
/// The same, as a new string.
std::string encode(const RequestList& list);
/// Its decoder, into `out` (cleared first, its room kept); protocol_error naming what was
/// malformed.
Status decode_request_list(std::string_view bytes, RequestList& out);
/// The same, as a new list.
Result<RequestList> decode_request_list(std::string_view bytes);

/// Whether two requests describe the same operation; with `skip_first_dim`, the first
/// dimension of allgather and alltoall shapes (which may differ between ranks) is not compared.
bool same_description(const Request& a, const Request& b, bool skip_first_dim = false);

}  // namespace hoop::runtime
