// ShardedLoader on a dataset whose every pixel holds its example's index, so each batch row
// says which example it is.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "hoop/train.h"

namespace hoop::train {
namespace {

using ::testing::HasSubstr;

constexpr std::size_t kPixels = 28 * 28;

Dataset numbered_dataset(std::size_t n) {
  Dataset data;
  data.images = Tensor({static_cast<std::int64_t>(n), 1, 28, 28});
  data.labels.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t p = 0; p < kPixels; ++p) data.images[i * kPixels + p] = static_cast<float>(i);
    data.labels[i] = static_cast<int>(i % 10);
  }
  return data;
}

// The example indices of every batch of one epoch, checking each batch's shape, that every
// row is one example throughout and that the labels travel with their images.
std::vector<std::vector<std::size_t>> epoch_batches(ShardedLoader& loader, int epoch,
                                                    std::size_t batch) {
  loader.start_epoch(epoch);
  std::vector<std::vector<std::size_t>> batches;
  Tensor images;
  std::vector<int> labels;
  while (loader.next(images, labels)) {
    EXPECT_EQ(images.shape(),
              (std::vector<std::int64_t>{static_cast<std::int64_t>(batch), 1, 28, 28}));
    EXPECT_EQ(labels.size(), batch);
    std::vector<std::size_t> indices;
    for (std::size_t b = 0; b < batch; ++b) {
      const float first = images[b * kPixels];
      EXPECT_EQ(images[b * kPixels + kPixels - 1], first);
      const auto index = static_cast<std::size_t>(first);
      EXPECT_EQ(labels[b], static_cast<int>(index % 10));
      indices.push_back(index);
    }
    batches.push_back(indices);
  }
  EXPECT_EQ(batches.size(), loader.steps_per_epoch());
  return batches;
}

std::vector<std::size_t> concat_batches(const std::vector<std::vector<std::size_t>>& batches) {
  std::vector<std::size_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

TEST(ShardedLoader, RanksTogetherSeeEveryExampleOncePerEpoch) {
  const Dataset data = numbered_dataset(96);
  std::multiset<std::size_t> seen;
  std::vector<std::set<std::size_t>> per_rank(3);
  for (int rank = 0; rank < 3; ++rank) {
    ShardedLoader loader(data, 4, rank, 3, 7);
    EXPECT_EQ(loader.steps_per_epoch(), 8u);
    for (std::size_t index : concat_batches(epoch_batches(loader, 2, 4))) {
      seen.insert(index);
      per_rank[static_cast<std::size_t>(rank)].insert(index);
    }
  }
  ASSERT_EQ(seen.size(), 96u);
  for (std::size_t i = 0; i < 96; ++i) EXPECT_EQ(seen.count(i), 1u) << "example " << i;
  for (const auto& share : per_rank) EXPECT_EQ(share.size(), 32u);
}

TEST(ShardedLoader, DropsTheLastIncompleteGlobalBatch) {
  const Dataset data = numbered_dataset(103);
  std::multiset<std::size_t> seen;
  for (int rank = 0; rank < 3; ++rank) {
    ShardedLoader loader(data, 4, rank, 3, 7);
    EXPECT_EQ(loader.steps_per_epoch(), 8u);  // 103 / 12
    for (std::size_t index : concat_batches(epoch_batches(loader, 0, 4))) seen.insert(index);
  }
  EXPECT_EQ(seen.size(), 96u);
  EXPECT_EQ(std::set<std::size_t>(seen.begin(), seen.end()).size(), 96u);
}

TEST(ShardedLoader, OneRankWithTheGlobalBatchSeesWhatAllRanksSee) {
  const Dataset data = numbered_dataset(50);
  ShardedLoader rank0(data, 3, 0, 2, 11);
  ShardedLoader rank1(data, 3, 1, 2, 11);
  ShardedLoader single(data, 6, 0, 1, 11);
  for (int epoch = 0; epoch < 2; ++epoch) {
    const auto b0 = epoch_batches(rank0, epoch, 3);
    const auto b1 = epoch_batches(rank1, epoch, 3);
    const auto whole = epoch_batches(single, epoch, 6);
    ASSERT_EQ(whole.size(), 8u);
    ASSERT_EQ(b0.size(), whole.size());
    for (std::size_t k = 0; k < whole.size(); ++k) {
      std::vector<std::size_t> joined = b0[k];
      joined.insert(joined.end(), b1[k].begin(), b1[k].end());
      EXPECT_EQ(joined, whole[k]) << "epoch " << epoch << " step " << k;
    }
  }
}

TEST(ShardedLoader, OrderDependsOnlyOnSeedAndEpoch) {
  const Dataset data = numbered_dataset(64);
  ShardedLoader a(data, 8, 0, 1, 5);
  ShardedLoader b(data, 8, 0, 1, 5);
  ShardedLoader other_seed(data, 8, 0, 1, 6);
  const auto a1 = concat_batches(epoch_batches(a, 1, 8));
  EXPECT_EQ(a1, concat_batches(epoch_batches(b, 1, 8)));
  EXPECT_NE(a1, concat_batches(epoch_batches(other_seed, 1, 8)));
  const auto a0 = concat_batches(epoch_batches(a, 0, 8));
  EXPECT_NE(a0, a1);
  EXPECT_NE(concat_batches(epoch_batches(a, 2, 8)), a1);
  // Going back to an epoch replays it.
  EXPECT_EQ(concat_batches(epoch_batches(a, 1, 8)), a1);
  // A shuffle, not the identity.
  std::vector<std::size_t> identity(64);
  for (std::size_t i = 0; i < 64; ++i) identity[i] = i;
  EXPECT_NE(a1, identity);
}

// The permutation is part of the contract (resumed runs and ranks built with different
// compilers or standard libraries must agree), so a change to it must be deliberate.
TEST(ShardedLoader, PermutationIsPinned) {
  const Dataset data = numbered_dataset(10);
  ShardedLoader loader(data, 10, 0, 1, 42);
  EXPECT_EQ(concat_batches(epoch_batches(loader, 0, 10)),
            (std::vector<std::size_t>{1, 7, 9, 0, 3, 8, 4, 2, 5, 6}));
  EXPECT_EQ(concat_batches(epoch_batches(loader, 3, 10)),
            (std::vector<std::size_t>{4, 8, 7, 6, 0, 1, 3, 2, 9, 5}));
}

TEST(ShardedLoader, WithoutShuffleTheOrderIsTheIdentity) {
  const Dataset data = numbered_dataset(20);
  for (int rank = 0; rank < 2; ++rank) {
    ShardedLoader loader(data, 3, rank, 2, 99, /*shuffle=*/false);
    const auto batches = epoch_batches(loader, 5, 3);
    ASSERT_EQ(batches.size(), 3u);  // 20 / 6
    for (std::size_t k = 0; k < batches.size(); ++k) {
      for (std::size_t b = 0; b < 3; ++b) {
        EXPECT_EQ(batches[k][b], k * 6 + static_cast<std::size_t>(rank) * 3 + b);
      }
    }
  }
}

TEST(ShardedLoader, NextReusesTheTensorAndStopsAfterTheLastStep) {
  const Dataset data = numbered_dataset(10);
  ShardedLoader loader(data, 4, 0, 1, 1);
  EXPECT_EQ(loader.steps_per_epoch(), 2u);
  // The constructor starts epoch 0, so next() works straight away.
  Tensor images({4, 1, 28, 28});
  const float* storage = images.data();
  std::vector<int> labels;
  ASSERT_TRUE(loader.next(images, labels));
  EXPECT_EQ(images.data(), storage);
  ASSERT_TRUE(loader.next(images, labels));
  EXPECT_EQ(images.data(), storage);
  EXPECT_FALSE(loader.next(images, labels));
  EXPECT_FALSE(loader.next(images, labels));
  loader.start_epoch(1);
  EXPECT_TRUE(loader.next(images, labels));
  // A tensor of another shape is replaced.
  Tensor small({2, 2});
  loader.start_epoch(1);
  ASSERT_TRUE(loader.next(small, labels));
  EXPECT_EQ(small.shape(), (std::vector<std::int64_t>{4, 1, 28, 28}));
}

std::string construction_error(const Dataset& data, std::size_t batch, int rank, int size) {
  try {
    ShardedLoader loader(data, batch, rank, size, 0);
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    return e.status().message();
  }
  return "";
}

TEST(ShardedLoader, RejectsBadArguments) {
  const Dataset data = numbered_dataset(10);
  EXPECT_THAT(construction_error(data, 0, 0, 1), HasSubstr("batch_per_rank must be > 0"));
  EXPECT_THAT(construction_error(data, 1, 0, 0), HasSubstr("size must be > 0, got 0"));
  EXPECT_THAT(construction_error(data, 1, -1, 2), HasSubstr("rank -1 is outside [0, 2)"));
  EXPECT_THAT(construction_error(data, 1, 2, 2), HasSubstr("rank 2 is outside [0, 2)"));
  EXPECT_THAT(construction_error(data, 4, 0, 3),
              HasSubstr("a global batch of 4 per rank x 3 ranks is larger than the 10 examples"));
  EXPECT_EQ(construction_error(data, 5, 1, 2), "");

  Dataset mismatched = numbered_dataset(10);
  mismatched.labels.pop_back();
  EXPECT_THAT(construction_error(mismatched, 1, 0, 1),
              HasSubstr("images [10, 1, 28, 28] do not match 9 labels"));
}

}  // namespace
}  // namespace hoop::train
