#include "collectives/patterns/partition.h"

#include <algorithm>
#include <cassert>

namespace hoop::patterns {

Partition::Partition(std::size_t count, int parts)
    : count_(count),
      parts_(parts),
      base_(count / static_cast<std::size_t>(parts)),
      extra_(count % static_cast<std::size_t>(parts)) {
  assert(parts >= 1);
}

std::size_t Partition::offset_of(int index) const {
  const auto i = static_cast<std::size_t>(index);
  // The first `extra_` chunks hold base_ + 1 elements each.
  return i * base_ + std::min(i, extra_);
}

Range Partition::chunk(int index) const {
  assert(index >= 0 && index < parts_);
  const std::size_t begin = offset_of(index);
  return Range{begin, offset_of(index + 1) - begin};
}

Range Partition::chunks(int first, int n) const {
  assert(first >= 0 && n >= 0 && first + n <= parts_);
  const std::size_t begin = offset_of(first);
  return Range{begin, offset_of(first + n) - begin};
}

int Partition::chunk_of(std::size_t element) const {
  assert(element < count_);
  const std::size_t long_span = extra_ * (base_ + 1);
  if (element < long_span) return static_cast<int>(element / (base_ + 1));
  // Past the long chunks every chunk has base_ >= 1 elements (base_ == 0 means no element lies
  // beyond long_span).
  return static_cast<int>(extra_ + (element - long_span) / base_);
}

std::size_t slice_count(Range chunk, std::size_t max_slice_elems) {
  assert(max_slice_elems >= 1);
  return chunk.length / max_slice_elems + (chunk.length % max_slice_elems != 0 ? 1 : 0);
}

Range slice(Range chunk, std::size_t max_slice_elems, std::size_t index) {
  const std::size_t n = slice_count(chunk, max_slice_elems);
  assert(index < n);
  const std::size_t base = chunk.length / n;
  const std::size_t extra = chunk.length % n;
  const std::size_t begin = index * base + std::min(index, extra);
  const std::size_t end = (index + 1) * base + std::min(index + 1, extra);
  return Range{chunk.offset + begin, end - begin};
}

}  // namespace hoop::patterns
