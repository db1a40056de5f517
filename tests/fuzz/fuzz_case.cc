#include "tests/fuzz/fuzz_case.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>
#include <span>

#include "tests/comm/comm_reference.h"

namespace hoop::fuzz {
namespace {

/// SplitMix64 over a counter: the same stream in every build and on every rank, which
/// std::uniform_int_distribution (implementation-defined) would not promise for replays.
class Rng {
 public:
  explicit Rng(std::uint64_t state) : state_(state) {}
  std::uint64_t next() { return comm_check::mix(state_++); }
  /// Uniform in [0, n); 0 when n is 0.
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }
  bool percent(unsigned p) { return below(100) < p; }
  template <typename T>
  T pick(std::span<const T> from) {
    return from[below(from.size())];
  }

 private:
  std::uint64_t state_;
};

struct Weighted {
  Collective collective;
  unsigned weight;
};
// Allreduce weighs most: it alone has algorithms to choose from.
constexpr Weighted kCollectiveWeights[] = {
    {Collective::kAllreduce, 30},  {Collective::kBroadcast, 10},     {Collective::kAllgather, 10},
    {Collective::kAllgatherv, 10}, {Collective::kReduceScatter, 14}, {Collective::kAlltoall, 10},
    {Collective::kAlltoallv, 12},  {Collective::kBarrier, 4},        {Collective::kReduce, 10},
    {Collective::kGather, 6},      {Collective::kGatherv, 6},        {Collective::kScatter, 6},
    {Collective::kScatterv, 6},    {Collective::kReduceScatterv, 10}};

constexpr std::size_t kSmallCounts[] = {0, 1, 2, 3, 5, 7, 13, 31, 61, 127, 257, 1021, 4099};

constexpr std::size_t kKiB = 1024;
// Byte sizes at which the algorithms cut buffers differently (src/collectives/algorithms):
// exchange slices of recursive doubling and Rabenseifner (a quarter, within 32 KiB..512 KiB),
// ring slices (a quarter of a chunk, within 64 KiB..512 KiB: chunks of 256 KiB and 2 MiB),
// the tree's 128 KiB slices, the broadcast chain from 256 KiB, the cost model's two-rank
// exchange up to 1 MiB, the hierarchical allreduce's 4 MiB segments and the shared-memory
// transport's 4 MiB rings.
constexpr std::size_t kBoundaryBytes[] = {32 * kKiB,  64 * kKiB,   128 * kKiB,  256 * kKiB,
                                          512 * kKiB, 1024 * kKiB, 2048 * kKiB, 4096 * kKiB};

Collective pick_collective(Rng& rng) {
  unsigned total = 0;
  for (const Weighted& w : kCollectiveWeights) total += w.weight;
  std::size_t at = rng.below(total);
  for (const Weighted& w : kCollectiveWeights) {
    if (at < w.weight) return w.collective;
    at -= w.weight;
  }
  return Collective::kBarrier;
}

/// A count of at most `limit` elements of `es` bytes: 0, 1 or a small prime; a boundary of
/// kBoundaryBytes (times 1, 2 or the job size: the ring cuts a buffer into one chunk per rank,
/// the halvings into halves) plus -1, 0 or +1; or a random count, log-uniform up to the limit.
std::size_t pick_count(Rng& rng, std::size_t es, int size, std::size_t limit) {
  const std::size_t kind = rng.below(10);
  if (kind < 4) return std::min(rng.pick<std::size_t>(kSmallCounts), limit);
  if (kind < 8) {
    const std::size_t factors[] = {1, 2, static_cast<std::size_t>(size)};
    std::vector<std::size_t> fitting;
    for (std::size_t bytes : kBoundaryBytes)
      for (std::size_t f : factors)
        if (bytes * f / es + 1 <= limit) fitting.push_back(bytes * f / es);
    if (!fitting.empty()) return rng.pick<std::size_t>(fitting) + rng.below(3) - 1;
  }
  std::size_t bits = 0;
  while (bits < 63 && (std::size_t{1} << bits) <= limit) ++bits;
  return std::min(limit, rng.below((std::size_t{1} << rng.below(bits + 1)) + 1));
}

Placement pick_placement(Rng& rng, bool null_input_allowed) {
  const std::size_t p = rng.below(10);
  if (p < 5) return Placement::kSeparate;
  if (p < 8 || !null_input_allowed) return Placement::kAliased;
  return Placement::kNullInput;
}

int pick_offset(Rng& rng) { return rng.percent(20) ? 0 : 1 + static_cast<int>(rng.below(15)); }

std::string_view placement_name(Placement p) {
  switch (p) {
    case Placement::kSeparate:
      return "separate";
    case Placement::kAliased:
      return "in-place";
    case Placement::kNullInput:
      return "in-place(null input)";
  }
  return "?";
}

}  // namespace

Case make_case(std::uint64_t seed, std::uint64_t index, const JobShape& shape) {
  Rng rng(comm_check::mix(comm_check::mix(seed) + index));
  Case c;
  c.seed = seed;
  c.index = index;
  c.data_key = rng.next();
  c.collective = pick_collective(rng);
  c.dtype = rng.pick<DataType>(kAllDataTypes);
  c.op = rng.pick<ReduceOp>(kAllReduceOps);
  std::vector<Algorithm> algorithms = {Algorithm::kAuto, Algorithm::kRing,
                                       Algorithm::kRecursiveDoubling, Algorithm::kTree,
                                       Algorithm::kRabenseifner};
  if (shape.hierarchical) algorithms.push_back(Algorithm::kHierarchical);
  c.algorithm = rng.pick<Algorithm>(algorithms);
  c.root = static_cast<int>(rng.below(shape.size));
  c.input_offset = pick_offset(rng);
  c.output_offset = pick_offset(rng);
  if (dtype_is_float(c.dtype) && c.op != ReduceOp::kProd) {
    constexpr int kScales[] = {-4, 0, 3};
    c.scale_exp = rng.pick<int>(kScales);
  }

  const std::size_t es = dtype_size(c.dtype);
  const auto n = static_cast<std::size_t>(shape.size);
  // The largest buffer of a case holds `n` blocks for these collectives.
  const bool n_blocks =
      c.collective == Collective::kAllgather || c.collective == Collective::kReduceScatter ||
      c.collective == Collective::kAlltoall || c.collective == Collective::kGather ||
      c.collective == Collective::kScatter;
  const std::size_t block_limit = shape.max_bytes / es / (n_blocks ? n : 1);
  const std::size_t v_limit = shape.max_bytes / es / n;
  switch (c.collective) {
    case Collective::kAllreduce:
    case Collective::kReduceScatter:
    case Collective::kAlltoall:
    case Collective::kReduce:
    case Collective::kGather:
    case Collective::kScatter:
      c.placement = pick_placement(rng, true);
      c.count = pick_count(rng, es, shape.size, block_limit);
      break;
    case Collective::kAllgather:
      c.placement = pick_placement(rng, true);
      c.count = pick_count(rng, es, shape.size, block_limit);
      break;
    case Collective::kBroadcast:
      c.count = pick_count(rng, es, shape.size, block_limit);
      break;
    case Collective::kAllgatherv:
    case Collective::kGatherv:
    case Collective::kScatterv:
    case Collective::kReduceScatterv:
      // The public API documents a null input for allgather only (of the all- forms).
      c.placement = pick_placement(rng, c.collective != Collective::kAllgatherv);
      for (std::size_t r = 0; r < n; ++r)
        c.counts.push_back(rng.percent(25) ? 0 : pick_count(rng, es, shape.size, v_limit));
      break;
    case Collective::kAlltoallv: {
      // In place needs every rank's send counts equal to its receive counts: a symmetric matrix.
      c.placement = pick_placement(rng, true);
      const bool symmetric = c.placement != Placement::kSeparate;
      c.counts.assign(n * n, 0);
      for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = symmetric ? i : 0; j < n; ++j) {
          const std::size_t k = rng.percent(25) ? 0 : pick_count(rng, es, shape.size, v_limit);
          c.counts[i * n + j] = k;
          if (symmetric) c.counts[j * n + i] = k;
        }
      }
      break;
    }
    case Collective::kBarrier:
      break;
  }
  return c;
}

std::vector<std::size_t> send_counts(const Case& c, int size, int rank) {
  const auto n = static_cast<std::size_t>(size);
  const auto* row = c.counts.data() + static_cast<std::size_t>(rank) * n;
  return std::vector<std::size_t>(row, row + n);
}

std::vector<std::size_t> recv_counts(const Case& c, int size, int rank) {
  const auto n = static_cast<std::size_t>(size);
  std::vector<std::size_t> out(n);
  for (std::size_t j = 0; j < n; ++j) out[j] = c.counts[j * n + static_cast<std::size_t>(rank)];
  return out;
}

std::string describe(const Case& c) {
  std::string s =
      fmt::format("case {} of seed {}: {}", c.index, c.seed, collective_name(c.collective));
  if (c.collective == Collective::kBarrier) return s;
  s += fmt::format(" dtype={}", dtype_name(c.dtype));
  const bool rooted = c.collective == Collective::kReduce || c.collective == Collective::kGather ||
                      c.collective == Collective::kGatherv ||
                      c.collective == Collective::kScatter || c.collective == Collective::kScatterv;
  if (reduces(c.collective)) s += fmt::format(" op={}", op_name(c.op));
  if (rooted) s += fmt::format(" root={}", c.root);
  if (c.collective == Collective::kAllreduce)
    s += fmt::format(" algorithm={}", algorithm_name(c.algorithm));
  if (per_rank_counts(c.collective)) {
    s += fmt::format(" counts=[{}]", fmt::join(c.counts, ","));
  } else if (c.collective == Collective::kAlltoallv) {
    std::size_t n = 1;
    while (n * n < c.counts.size()) ++n;
    s += " counts(from\\to)=[";
    for (std::size_t i = 0; i < n; ++i) {
      s += fmt::format("{}[{}]", i > 0 ? "," : "",
                       fmt::join(c.counts.begin() + i * n, c.counts.begin() + (i + 1) * n, ","));
    }
    s += "]";
  } else {
    s += fmt::format(" count={}", c.count);
  }
  if (c.collective == Collective::kBroadcast) {
    s += fmt::format(" root={} offset={}", c.root, c.output_offset);
  } else if (c.placement == Placement::kSeparate) {
    s += fmt::format(" separate input_offset={} output_offset={}", c.input_offset, c.output_offset);
  } else {
    s += fmt::format(" {} output_offset={}", placement_name(c.placement), c.output_offset);
  }
  if (c.scale_exp != 0 &&
      reduces(c.collective))
    s += fmt::format(" scale=2^{}", c.scale_exp);
  return s;
}

}  // namespace hoop::fuzz
