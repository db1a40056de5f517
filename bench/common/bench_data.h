// Inputs for the #wrong column: every rank's data is a small integer per element (different per
// rank and per element) chosen so that every partial result of the reduction is an integer the
// dtype represents exactly. Then the result is the same in any summation order, and a rank can
// compare it bit for bit with the value computed here on the host.
//
//   sum, min, max: values in [-4, 4] ([0, 8] for u8), so |partial sum| <= 4n.
//   avg:           the sum's values times n, so the sum is n * S and the average S exactly,
//                  whether an implementation divides at the end or scales each input first.
//   prod:          1 or 2 (times -1 now and then for signed types), so products are powers of
//                  two; at most one rank in four contributes a 2 to any element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "hoop/core.h"

namespace hoop::bench {

/// Frees what allocate() returned.
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
/// A benchmark buffer.
using Buffer = std::unique_ptr<std::byte[], FreeDeleter>;

/// A page-aligned buffer of at least `bytes` bytes (at least one page), so that no
/// implementation is penalised by a buffer straddling cache lines and every loop measures alike.
Buffer allocate(std::size_t bytes);

/// Ok when the allreduce inputs for (`dtype`, `op`) stay exact on `nranks` ranks; else why not.
Status check_exact(DataType dtype, ReduceOp op, int nranks);
/// Writes rank `rank`'s input for an allreduce of `count` elements of `dtype` with `op`.
void fill_allreduce_input(void* buf, std::size_t count, DataType dtype, ReduceOp op, int rank,
                          int nranks);
/// Number of elements of `result` that differ bit for bit from the exact allreduce result.
/// `result` holds elements `first` .. `first + count` of it (reduce-scatter checks one block).
std::int64_t count_allreduce_wrong(const void* result, std::size_t count, DataType dtype,
                                   ReduceOp op, int nranks, std::size_t first = 0);
/// Writes block `block` for the collectives that only move data (broadcast, allgather,
/// alltoall): integers in [-90, 89] ([0, 179] for u8), exact in every dtype, with a phase that
/// differs between blocks (up to 180 of them), so a block landing in the wrong place is counted.
void fill_block(void* buf, std::size_t count, DataType dtype, std::uint64_t block);
/// Number of elements of `result` that differ bit for bit from what fill_block(`block`) wrote.
std::int64_t count_block_wrong(const void* result, std::size_t count, DataType dtype,
                               std::uint64_t block);
/// Fills `count` elements of `buf` with a value no check accepts, so stale output is caught.
void poison(void* buf, std::size_t count, DataType dtype);

}  // namespace hoop::bench
