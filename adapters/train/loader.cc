// Data-parallel batching: every rank draws the same permutation of the dataset and takes its
// own slice of each global batch, so the ranks together see each example once per epoch
// without exchanging anything.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "hoop/train.h"

namespace hoop::train {
namespace {

// A uniform draw from [0, bound) by rejection. std::uniform_int_distribution (like
// std::shuffle) is implementation-defined, and ranks built against different standard
// libraries must still agree on the order; mt19937_64's output sequence is fixed by the
// standard.
std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t bound) {
  // Values below 2^64 mod bound would make the low residues more likely; skip them.
  const std::uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const std::uint64_t r = rng();
    if (r >= threshold) return r % bound;
  }
}

}  // namespace

ShardedLoader::ShardedLoader(const Dataset& data, std::size_t batch_per_rank, int rank, int size,
                             std::uint64_t seed, bool shuffle)
    : data_(data),
      batch_(batch_per_rank),
      rank_(rank),
      size_(size),
      seed_(seed),
      shuffle_(shuffle) {
  const std::vector<std::int64_t>& shape = data_.images.shape();
  if (shape.size() != 4 || shape[0] != static_cast<std::int64_t>(data_.size())) {
    throw Error(invalid_argument(
        fmt::format("ShardedLoader: images {} do not match {} labels (expected [{}, C, H, W])",
                    data_.images.shape_string(), data_.size(), data_.size())));
  }
  if (data_.size() > std::numeric_limits<std::uint32_t>::max()) {
    throw Error(invalid_argument(
        fmt::format("ShardedLoader: {} examples is more than 2^32 - 1", data_.size())));
  }
  if (batch_ == 0) throw Error(invalid_argument("ShardedLoader: batch_per_rank must be > 0"));
  if (size_ <= 0) {
    throw Error(invalid_argument(fmt::format("ShardedLoader: size must be > 0, got {}", size_)));
  }
  if (rank_ < 0 || rank_ >= size_) {
    throw Error(
        invalid_argument(fmt::format("ShardedLoader: rank {} is outside [0, {})", rank_, size_)));
  }
  // batch * size <= N, written so that the product cannot overflow.
  if (batch_ > data_.size() / static_cast<std::size_t>(size_)) {
    throw Error(invalid_argument(
        fmt::format("ShardedLoader: a global batch of {} per rank x {} ranks is larger than the {} "
                    "examples of the dataset",
                    batch_, size_, data_.size())));
  }
  start_epoch(0);
}

void ShardedLoader::start_epoch(int epoch, std::size_t skip) {
  const std::size_t n = data_.size();
  if (skip > n)
    throw Error(
        invalid_argument(fmt::format("ShardedLoader: cannot skip {} of {} examples", skip, n)));
  order_.resize(n);
  for (std::size_t i = 0; i < n; ++i) order_[i] = static_cast<std::uint32_t>(i);
  skip_ = skip;
  step_ = 0;
  if (!shuffle_) return;
  // Multiplying by 2^64 / golden ratio (odd, so a bijection) spreads consecutive epochs over
  // the seed space, where seed ^ epoch alone would give seed 1 epoch 0 the order of seed 0
  // epoch 1.
  std::mt19937_64 rng(seed_ ^ (static_cast<std::uint64_t>(epoch) * 0x9E3779B97F4A7C15ull));
  // Fisher-Yates, written out so that the order is the same with every standard library.
  for (std::size_t i = n; i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(uniform_below(rng, i));
    std::swap(order_[i - 1], order_[j]);
  }
}

bool ShardedLoader::next(Tensor& images, std::vector<int>& labels) {
  if (step_ >= steps_per_epoch()) return false;
  std::vector<std::int64_t> shape = data_.images.shape();
  shape[0] = static_cast<std::int64_t>(batch_);
  // Reusing the caller's tensor keeps the training loop free of per-step allocations.
  if (images.shape() != shape || images.is_cuda()) images = Tensor(shape);
  labels.resize(batch_);

  const std::size_t example = data_.images.size() / data_.size();
  const std::size_t first = skip_ + step_ * batch_ * static_cast<std::size_t>(size_) +
                            static_cast<std::size_t>(rank_) * batch_;
  const float* src = data_.images.data();
  float* dst = images.data();
  for (std::size_t b = 0; b < batch_; ++b) {
    const std::size_t index = order_[first + b];
    std::memcpy(dst + b * example, src + index * example, example * sizeof(float));
    labels[b] = data_.labels[index];
  }
  ++step_;
  return true;
}

std::size_t ShardedLoader::steps_per_epoch() const {
  return (data_.size() - skip_) / (batch_ * static_cast<std::size_t>(size_));
}

}  // namespace hoop::train
