// A synchronous, symbolic executor for the pattern tests. Every rank owns a buffer of `count`
// elements in which each element holds the set of ranks whose contribution it contains; large
// counts stay cheap because the buffer is an interval map that splits only where a pattern's
// ranges cut it. A step takes every rank's posted operations, checks that they match pairwise the
// way the transport contract requires (the k-th send from a to b pairs with the k-th receive b
// posts for a, with the same range), then applies all of them to the pre-step state. Reducing a
// contribution into an element that already holds it is counted as a duplicate.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bitset>
#include <cstddef>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "collectives/patterns/partition.h"

namespace hoop::patterns::testing {

/// The largest job the simulation can represent.
inline constexpr int kMaxRanks = 256;

/// The ranks whose contributions an element contains.
using Contributions = std::bitset<kMaxRanks>;

/// The set of the first `n` ranks.
inline Contributions all_ranks(int n) {
  Contributions c;
  for (int r = 0; r < n; ++r) c.set(static_cast<std::size_t>(r));
  return c;
}

/// The set holding only `rank`.
inline Contributions only(int rank) {
  Contributions c;
  c.set(static_cast<std::size_t>(rank));
  return c;
}

/// One rank's buffer of symbolic elements.
class SymbolicBuffer {
 public:
  /// A buffer of `count` elements holding nothing.
  explicit SymbolicBuffer(std::size_t count) : count_(count) {
    if (count > 0) segments_[0] = Contributions();
  }

  /// The number of elements.
  std::size_t count() const { return count_; }

  /// Sets every element of `r` to `c`.
  void set(Range r, const Contributions& c) {
    for_each_segment(r, [&](Contributions& seg) { seg = c; });
  }

  /// The contents of `r` as (range, contributions) pieces in order.
  std::vector<std::pair<Range, Contributions>> read(Range r) const {
    std::vector<std::pair<Range, Contributions>> out;
    if (r.empty()) return out;
    auto it = std::prev(segments_.upper_bound(r.offset));
    for (; it != segments_.end() && it->first < r.end(); ++it) {
      const std::size_t seg_end = std::next(it) == segments_.end() ? count_ : std::next(it)->first;
      const std::size_t begin = std::max(it->first, r.offset);
      const std::size_t end = std::min(seg_end, r.end());
      out.push_back({Range{begin, end - begin}, it->second});
    }
    return out;
  }

  /// Reduces `pieces` into the buffer at their offsets; returns how many pieces overlapped
  /// contributions already present.
  int reduce(const std::vector<std::pair<Range, Contributions>>& pieces) {
    int duplicates = 0;
    for (const auto& [range, c] : pieces) {
      for_each_segment(range, [&](Contributions& seg) {
        if ((seg & c).any()) ++duplicates;
        seg |= c;
      });
    }
    return duplicates;
  }

  /// Copies `pieces` into the buffer at their offsets.
  void copy(const std::vector<std::pair<Range, Contributions>>& pieces) {
    for (const auto& [range, c] : pieces) set(range, c);
  }

  /// Whether every element of `r` holds exactly `expected`.
  bool holds(Range r, const Contributions& expected) const {
    for (const auto& piece : read(r)) {
      if (piece.second != expected) return false;
    }
    return true;
  }

 private:
  void split(std::size_t at) {
    if (at >= count_) return;
    auto it = std::prev(segments_.upper_bound(at));
    if (it->first != at) segments_[at] = it->second;
  }

  template <typename F>
  void for_each_segment(Range r, F f) {
    if (r.empty()) return;
    split(r.offset);
    split(r.end());
    for (auto it = segments_.find(r.offset); it != segments_.end() && it->first < r.end(); ++it) {
      f(it->second);
    }
  }

  std::size_t count_;
  std::map<std::size_t, Contributions> segments_;  // keyed by first element; covers [0, count)
};

/// What a rank posts in one step.
enum class OpKind { kSend, kRecvReduce, kRecvCopy };

/// One posted operation: send `range` to `peer`, or receive `range` from it.
struct Op {
  OpKind kind;
  int peer;
  Range range;
};

/// Every rank's operations for one step, indexed by rank, each in posting order.
using StepOps = std::vector<std::vector<Op>>;

/// n symbolic buffers driven step by step.
class Simulation {
 public:
  /// `n` ranks with empty buffers of `count` elements.
  Simulation(int n, std::size_t count)
      : n_(n),
        buffers_(static_cast<std::size_t>(n), SymbolicBuffer(count)),
        sent_(static_cast<std::size_t>(n), 0) {}

  /// The number of ranks.
  int size() const { return n_; }
  /// Rank `rank`'s buffer.
  SymbolicBuffer& buffer(int rank) { return buffers_[static_cast<std::size_t>(rank)]; }
  /// How many duplicate reductions have happened so far.
  int duplicates() const { return duplicates_; }
  /// How many elements `rank` has sent so far.
  std::size_t sent(int rank) const { return sent_[static_cast<std::size_t>(rank)]; }

  /// A fresh, empty set of operations for one step.
  StepOps new_step() const { return StepOps(static_cast<std::size_t>(n_)); }

  /// Checks that `ops` match pairwise, then applies them; returns "" or what went wrong.
  std::string step(const StepOps& ops) {
    // Every message as (from, to, range), sends and receives apart, each in posting order; after
    // a stable sort by link the two lists must agree entry for entry.
    struct Message {
      int from;
      int to;
      Range range;
    };
    std::vector<Message> sends;
    std::vector<Message> recvs;
    for (int r = 0; r < n_; ++r) {
      for (const Op& op : ops[static_cast<std::size_t>(r)]) {
        if (op.peer < 0 || op.peer >= n_ || op.peer == r) {
          return "rank " + std::to_string(r) + " names bad peer " + std::to_string(op.peer);
        }
        if (op.range.end() > buffer(r).count()) {
          return "rank " + std::to_string(r) + " range past the buffer";
        }
        if (op.kind == OpKind::kSend) {
          sends.push_back({r, op.peer, op.range});
        } else {
          recvs.push_back({op.peer, r, op.range});
        }
      }
    }
    const auto by_link = [](const Message& x, const Message& y) {
      return x.from != y.from ? x.from < y.from : x.to < y.to;
    };
    std::stable_sort(sends.begin(), sends.end(), by_link);
    std::stable_sort(recvs.begin(), recvs.end(), by_link);
    for (std::size_t i = 0; i < std::max(sends.size(), recvs.size()); ++i) {
      const Message* x = i < sends.size() ? &sends[i] : nullptr;
      const Message* y = i < recvs.size() ? &recvs[i] : nullptr;
      if (x == nullptr || y == nullptr || x->from != y->from || x->to != y->to ||
          x->range != y->range) {
        const Message& m = x != nullptr ? *x : *y;
        return "unmatched message " + std::to_string(m.from) + " -> " + std::to_string(m.to) +
               " (a send or receive is missing, or their ranges differ)";
      }
    }
    // Read every payload from the pre-step state before any receive lands.
    std::vector<std::pair<int, std::vector<std::pair<Range, Contributions>>>> payloads;
    std::vector<OpKind> kinds;
    for (int r = 0; r < n_; ++r) {
      for (const Op& op : ops[static_cast<std::size_t>(r)]) {
        if (op.kind == OpKind::kSend) {
          sent_[static_cast<std::size_t>(r)] += op.range.length;
        } else {
          payloads.push_back({r, buffer(op.peer).read(op.range)});
          kinds.push_back(op.kind);
        }
      }
    }
    for (std::size_t i = 0; i < payloads.size(); ++i) {
      SymbolicBuffer& dst = buffer(payloads[i].first);
      if (kinds[i] == OpKind::kRecvReduce) {
        duplicates_ += dst.reduce(payloads[i].second);
      } else {
        dst.copy(payloads[i].second);
      }
    }
    return "";
  }

 private:
  int n_;
  std::vector<SymbolicBuffer> buffers_;
  std::vector<std::size_t> sent_;
  int duplicates_ = 0;
};

/// Appends one operation per pipeline slice of `chunk` (none for an empty chunk).
inline void add_sliced(std::vector<Op>& ops, OpKind kind, int peer, Range chunk,
                       std::size_t max_slice) {
  const std::size_t n = slice_count(chunk, max_slice);
  for (std::size_t i = 0; i < n; ++i) ops.push_back(Op{kind, peer, slice(chunk, max_slice, i)});
}

/// The job sizes every pattern is simulated for: 1..64 and a few larger ones.
inline std::vector<int> simulated_sizes() {
  std::vector<int> sizes;
  for (int n = 1; n <= 64; ++n) sizes.push_back(n);
  for (int n : {100, 127, 128, 129}) sizes.push_back(n);
  return sizes;
}

/// Names a size-parameterised test "n<size>".
inline std::string size_name(const ::testing::TestParamInfo<int>& info) {
  return "n" + std::to_string(info.param);
}

/// The element counts simulated for `n` ranks.
inline std::vector<std::size_t> simulated_counts(int n) {
  const auto un = static_cast<std::size_t>(n);
  return {0, 1, 2, 7, un - 1, un, un + 1, 1023, (std::size_t{1} << 20) + 3};
}

/// Slice sizes for a buffer of `count` elements: 1, 3 and unbounded, leaving out those that
/// would cut it into so many slices that the simulation gets slow.
inline std::vector<std::size_t> simulated_slices(std::size_t count) {
  std::vector<std::size_t> out;
  for (std::size_t s : {std::size_t{1}, std::size_t{3}, std::size_t{1} << 16}) {
    if (count / s <= 1100) out.push_back(s);
  }
  out.push_back(~std::size_t{0});
  return out;
}

}  // namespace hoop::patterns::testing
