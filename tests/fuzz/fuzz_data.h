// The data of collective_fuzz's cases: inputs whose reduction is exact in any combination
// order (so results compare bit for bit), random bytes for the collectives that only move
// data, and buffers at odd addresses with guard bytes around them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "tests/fuzz/fuzz_case.h"

namespace hoop::fuzz {

/// The inputs of a reduction case and their exact result. Every input is an integer, "units"
/// (times 2^scale_exp for floats), in a range where every partial result, whatever the order
/// the ranks' inputs are combined in, is an integer the dtype holds exactly. With `limit` the
/// largest integer up to which a dtype holds every integer (2^11 f16, 2^8 bf16, 2^24 f32,
/// 2^53 f64, the type's maximum for integers) and n ranks:
///   sum:      |units| <= limit / n (u8: 0 .. limit / n), so no partial sum passes limit.
///   avg:      n * w with |w| <= limit / n^2: the sum is n * sum(w), the average sum(w)
///             exactly, for float division and for integer division truncating alike.
///   min, max: any value: random bits for integers, integers within +-limit for floats.
///   prod:     +-1 or +-2 (u8: 1 or 2), the 2s only from the first log2(limit) ranks, so every
///             partial product is a power of two within limit; integers also get zeros
///             (floats do not: 0 * -1 is -0.0, which integer units cannot tell from +0.0).
class ExactReduction {
 public:
  ExactReduction(const Case& c, int size);
  /// Writes elements [first, first + count) of rank `rank`'s input.
  void input(int rank, std::size_t first, std::size_t count, std::byte* out) const;
  /// Writes elements [first, first + count) of the reduction over every rank's input.
  void expected(std::size_t first, std::size_t count, std::byte* out) const;

 private:
  std::int64_t units(int rank, std::size_t i) const;
  void encode(std::int64_t units, std::byte* out) const;

  DataType dtype_;
  ReduceOp op_;
  int size_;
  int scale_exp_;
  std::uint64_t key_;
  std::int64_t limit_;
};

/// Fills `bytes` bytes with random bits drawn from (key, stream): each block a collective moves
/// gets its own stream, so a block that lands in the wrong place differs from the expected one.
void fill_random(std::uint64_t key, std::uint64_t stream, std::byte* out, std::size_t bytes);

/// Empty when `count` elements of `got` equal `expected` bit for bit; else how many differ and
/// the first of them (index counted from `first`), with both values.
std::string compare(DataType dtype, const std::byte* got, const std::byte* expected,
                    std::size_t count, std::size_t first = 0);

/// A buffer starting `offset` bytes past a 64-byte boundary, between kGuard guard bytes before
/// (plus the offset's bytes) and kGuard after; guards and data start as random bytes.
class GuardedBuffer {
 public:
  static constexpr std::size_t kGuard = 64;
  GuardedBuffer(std::size_t bytes, int offset, std::uint64_t key);

  std::byte* data() { return base_.get() + lead(); }
  const std::byte* data() const { return base_.get() + lead(); }
  std::size_t size() const { return bytes_; }
  /// Empty when every guard byte still holds what it was given, else the first changed one.
  std::string check_guards(const char* name) const;

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::size_t lead() const { return kGuard + offset_; }

  std::size_t bytes_;
  std::size_t offset_;
  std::unique_ptr<std::byte[], Free> base_;
  std::array<std::byte, 2 * kGuard + 16> pattern_;
};

}  // namespace hoop::fuzz
