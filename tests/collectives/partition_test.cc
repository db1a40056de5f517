// Partition and slicing: exhaustive over small shapes, spot checks at sizes near 2^40.
#include "collectives/patterns/partition.h"

#include <gtest/gtest.h>

#include <cstddef>

namespace hoop::patterns {
namespace {

// Checks every invariant of one partition; returns on the first failure.
void check_partition(std::size_t count, int parts) {
  SCOPED_TRACE("count " + std::to_string(count) + " parts " + std::to_string(parts));
  const Partition p(count, parts);
  ASSERT_EQ(p.count(), count);
  ASSERT_EQ(p.parts(), parts);
  std::size_t next = 0;
  const std::size_t longest = p.chunk(0).length;
  for (int i = 0; i < parts; ++i) {
    const Range c = p.chunk(i);
    ASSERT_EQ(c.offset, next) << "chunk " << i << " is not contiguous";
    ASSERT_LE(c.length, longest) << "a later chunk is longer";
    ASSERT_LE(longest - c.length, 1u) << "unbalanced";
    if (i > 0) {
      ASSERT_LE(c.length, p.chunk(i - 1).length) << "the longer chunks come first";
    }
    next = c.end();
  }
  ASSERT_EQ(next, count);
  ASSERT_EQ(p.chunks(0, parts), (Range{0, count}));
  ASSERT_EQ(p.chunks(parts, 0), (Range{count, 0}));
}

TEST(Partition, ExhaustiveSmallShapes) {
  for (std::size_t count = 0; count <= 70; ++count) {
    for (int parts = 1; parts <= 70; ++parts) check_partition(count, parts);
  }
}

TEST(Partition, LargeShapes) {
  for (std::size_t count :
       {std::size_t{1} << 40, (std::size_t{1} << 40) + 3, (std::size_t{1} << 20) + 3}) {
    for (int parts : {1, 3, 64, 127, 1000, 4096}) check_partition(count, parts);
  }
}

TEST(Partition, ChunkOfInvertsChunk) {
  for (std::size_t count = 1; count <= 40; ++count) {
    for (int parts = 1; parts <= 45; ++parts) {
      const Partition p(count, parts);
      for (std::size_t e = 0; e < count; ++e) {
        const Range c = p.chunk(p.chunk_of(e));
        ASSERT_TRUE(c.offset <= e && e < c.end()) << count << " " << parts << " " << e;
      }
    }
  }
}

TEST(Partition, ChunksIsTheUnionOfItsChunks) {
  const Partition p(23, 8);
  for (int first = 0; first <= 8; ++first) {
    for (int n = 0; first + n <= 8; ++n) {
      const Range u = p.chunks(first, n);
      EXPECT_EQ(u.offset, first < 8 ? p.chunk(first).offset : 23u);
      std::size_t len = 0;
      for (int i = first; i < first + n; ++i) len += p.chunk(i).length;
      EXPECT_EQ(u.length, len);
    }
  }
}

TEST(Partition, MorePartsThanElementsLeavesEmptyTrailingChunks) {
  const Partition p(3, 5);
  EXPECT_EQ(p.chunk(0), (Range{0, 1}));
  EXPECT_EQ(p.chunk(2), (Range{2, 1}));
  EXPECT_EQ(p.chunk(3), (Range{3, 0}));
  EXPECT_EQ(p.chunk(4), (Range{3, 0}));
  EXPECT_EQ(Partition(0, 4).chunk(2), (Range{0, 0}));
}

TEST(Slice, ExhaustiveSmallShapes) {
  for (std::size_t offset : {std::size_t{0}, std::size_t{17}}) {
    for (std::size_t length = 0; length <= 100; ++length) {
      for (std::size_t max = 1; max <= 25; ++max) {
        SCOPED_TRACE(std::to_string(length) + " / " + std::to_string(max));
        const Range chunk{offset, length};
        const std::size_t n = slice_count(chunk, max);
        ASSERT_EQ(n, (length + max - 1) / max);
        std::size_t next = offset;
        for (std::size_t i = 0; i < n; ++i) {
          const Range s = slice(chunk, max, i);
          ASSERT_EQ(s.offset, next);
          ASSERT_GE(s.length, 1u);
          ASSERT_LE(s.length, max);
          ASSERT_LE(slice(chunk, max, 0).length - s.length, 1u) << "unbalanced";
          next = s.end();
        }
        ASSERT_EQ(next, chunk.end());
      }
    }
  }
}

TEST(Slice, HugeMaximumGivesOneSlice) {
  const Range chunk{5, (std::size_t{1} << 20) + 3};
  ASSERT_EQ(slice_count(chunk, ~std::size_t{0}), 1u);
  EXPECT_EQ(slice(chunk, ~std::size_t{0}, 0), chunk);
  EXPECT_EQ(slice_count(Range{9, 0}, 4), 0u);
}

}  // namespace
}  // namespace hoop::patterns
