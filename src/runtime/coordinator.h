// The coordinator's bookkeeping (one on every rank of each process set): which rank has
// submitted which tensor, when a tensor is ready everywhere, whether the ranks agree on it, how
// ready tensors are fused into responses, and which tensors stall. Pure logic over messages,
// and deterministic: the Controller feeds every rank's coordinator the same request lists in
// the same order, and each runs the same responses. It is tested without processes.
//
// Two paths. A tensor in the response cache that no rank describes differently travels as its
// slot, and the coordinator only counts, per slot, the ranks that have it ready (Horovod's
// bit-vector fast path): no description is copied, compared or looked up by name, so a
// steady-state step costs a few instructions per tensor. Everything else (new tensors,
// disagreements, groups, joined ranks) goes through the full table by name, which validates
// every field; a slot that meets such a case is moved there first.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hoop/transport.h"
#include "runtime/message.h"
#include "runtime/response_cache.h"

namespace hoop::runtime {

/// One rank's copy of its process set's negotiation.
class Coordinator {
 public:
  /// `size` ranks; fused allreduces up to `fusion_threshold` bytes (0: no fusion).
  Coordinator(int size, std::size_t fusion_threshold, const ResponseCache& cache)
      : size_(size), fusion_threshold_(fusion_threshold), cache_(cache) {}

  /// Takes one rank's message. A cache slot the coordinator does not know, or a tensor the
  /// rank already has pending, is a protocol error naming the rank.
  Status add(int rank, const RequestList& list, Clock::time_point now);
  /// The work that is ready now, into `out` (cleared first; its responses' room is reused):
  /// fused responses in order, a finished join, shutdown. Empty when there is nothing to send.
  void take_ready(ResponseList& out);
  /// The same, as a new list.
  ResponseList take_ready() {
    ResponseList out;
    take_ready(out);
    return out;
  }
  /// The autotuner's settings for the responses made from now on: the fusion threshold, and
  /// the algorithm of each allreduce (Adasum keeps its own).
  void tune(std::size_t fusion_threshold, Algorithm algorithm) {
    fusion_threshold_ = fusion_threshold;
    algorithm_ = algorithm;
  }
  /// Whether take_ready() would return something.
  bool has_ready() const;
  /// One line per tensor that some ranks submitted at least `after` ago and others have not:
  /// its name, the ranks that submitted it and the ones missing. Each tensor is reported again
  /// only after another `after`.
  std::vector<std::string> stalled(Clock::time_point now, std::chrono::milliseconds after);
  /// Whether any tensor has been pending for at least `after`.
  bool stalled_longer_than(Clock::time_point now, std::chrono::milliseconds after) const;
  /// How many cached tensors have been counted on the fast path (for tests).
  std::uint64_t fast_path_tensors() const { return fast_path_tensors_; }
  /// How many responses carry their inputs (for tests).
  std::uint64_t carried_responses() const { return carried_responses_; }

 private:
  struct Pending {
    std::vector<std::optional<Request>> by_rank;
    int submitted = 0;
    Clock::time_point first_seen;
    Clock::time_point last_report;
  };

  /// A cached tensor waiting on the fast path: which ranks have it ready, and the inputs that
  /// came with their lists (RequestList::carried), rank-major.
  struct SlotWait {
    std::vector<bool> by_rank;
    int count = 0;  // 0: not waiting
    int carried = 0;  // ranks whose input is in `inputs`
    std::string inputs;
    Clock::time_point first_seen;
    Clock::time_point last_report;
  };

  /// Counts `rank`'s readiness of cache slot `slot` (fast path), with its input where its list
  /// carried it.
  Status add_slot(int rank, std::uint32_t slot, Clock::time_point now,
                  std::optional<std::string_view> input = std::nullopt);
  /// The protocol_error for a list whose carried inputs are not the bytes its slots call for.
  Status carried_mismatch(int rank, const RequestList& list) const;
  /// Whether tensor `r` (described by a rank, or by the cache for a slot) may take the fast
  /// path: nobody has it in the full table, it is not part of a group and no rank has joined.
  bool fast_path_open(const Request& r) const;
  /// Moves the waiting slot `slot` into the full table, keeping its ranks and its age.
  void demote(std::uint32_t slot);
  /// demote() for every waiting slot.
  void demote_all();
  /// The line stalled() prints for a tensor.
  std::string stall_line(const std::string& name, OpType type, const std::vector<bool>& have,
                         Clock::time_point first_seen, Clock::time_point now) const;
  void add_request(int rank, Request r, Clock::time_point now);
  bool is_ready(const Pending& p) const;
  /// Moves every ready pending tensor (and completed group) to ready_, in arrival order.
  void collect_ready();
  /// The response for one ready tensor: validated, with its first dimensions.
  Response make_response(const std::string& name, Pending& p) const;
  std::vector<std::int32_t> joined_ranks() const;

  int size_;
  std::size_t fusion_threshold_;
  Algorithm algorithm_ = Algorithm::kAuto;
  const ResponseCache& cache_;
  std::unordered_map<std::string, Pending> pending_;
  std::vector<SlotWait> slots_;  // by cache slot, grown on demand
  int waiting_slots_ = 0;        // slots_ entries with count > 0
  std::uint64_t fast_path_tensors_ = 0;
  std::uint64_t carried_responses_ = 0;
  std::vector<std::string> arrival_;                     // pending names in the order first seen
  std::map<std::string, std::vector<Response>> groups_;  // ready members of incomplete groups
  /// A unit of work that is ready, in order: a cached tensor every rank named by its slot
  /// (described from the cache only when the responses are made, so that it costs no copy
  /// before), or a response of the full table (`full_[index]`). A slot whose every rank's input
  /// came with the lists has a copy of them in `carried_[index]`. Small and trivially copied, so
  /// that counting a training step's tensors allocates nothing once the vectors have grown.
  struct Ready {
    std::uint32_t slot = kNoSlot;
    std::uint32_t index = 0;
    bool carried = false;
  };
  void push_full(Response r) {
    ready_.push_back(Ready{kNoSlot, static_cast<std::uint32_t>(full_.size())});
    full_.push_back(std::move(r));
  }
  std::vector<Ready> ready_;
  std::vector<Response> full_;
  // The first carried_used_ are this round's; the strings stay, with their room, for the next.
  std::vector<std::string> carried_;
  std::uint32_t carried_used_ = 0;
  std::vector<bool> joined_;
  int joined_count_ = 0;
  int last_joined_ = -1;
  int shutdown_by_ = -1;  // the first rank that asked to shut down
  bool join_done_ = false;
};

}  // namespace hoop::runtime
