// Balanced contiguous splitting of a buffer of `count` elements: into one chunk per rank (ring,
// Rabenseifner, alltoall) and into pipeline slices of a bounded size. Every pattern in this folder
// speaks in element ranges; algorithms scale them by the element size to get bytes.
#pragma once

#include <cstddef>

namespace hoop::patterns {

/// A half-open range of elements [offset, offset + length) within one buffer.
struct Range {
  std::size_t offset = 0;
  std::size_t length = 0;

  /// One past the last element.
  std::size_t end() const { return offset + length; }
  /// Whether the range holds no element.
  bool empty() const { return length == 0; }
  /// Ranges are equal when both offset and length are.
  friend bool operator==(const Range&, const Range&) = default;
};

/// `count` elements split into `parts` contiguous chunks whose lengths differ by at most one, the
/// longer chunks first. With parts > count the trailing chunks are empty (and sit at offset
/// `count`), so every rank still has a well-defined, possibly zero-length, chunk.
class Partition {
 public:
  /// Splits `count` elements into `parts` (>= 1) chunks.
  Partition(std::size_t count, int parts);

  /// The total number of elements split.
  std::size_t count() const { return count_; }
  /// The number of chunks.
  int parts() const { return parts_; }
  /// Chunk `index` (in [0, parts)).
  Range chunk(int index) const;
  /// The union of chunks [first, first + n), contiguous by construction; n may be 0.
  Range chunks(int first, int n) const;
  /// The index of the chunk holding element `element` (< count).
  int chunk_of(std::size_t element) const;

 private:
  /// Where chunk `index` starts; index == parts gives count.
  std::size_t offset_of(int index) const;

  std::size_t count_;
  int parts_;
  std::size_t base_;   // length of the short chunks
  std::size_t extra_;  // how many chunks are one element longer
};

/// The number of pipeline slices `chunk` is cut into when no slice may exceed `max_slice_elems`
/// (>= 1): ceil(length / max). An empty chunk has no slice, on both sides of a transfer alike.
std::size_t slice_count(Range chunk, std::size_t max_slice_elems);

/// Slice `index` (< slice_count) of `chunk`. The slices are balanced (lengths differ by at most
/// one) rather than max-sized with a short tail, so the pipeline's last stage is not a runt.
Range slice(Range chunk, std::size_t max_slice_elems, std::size_t index);

}  // namespace hoop::patterns
