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

#include "hoop/core.h"

namespace hoop::bench {

/// Ok when the allreduce inputs for (`dtype`, `op`) stay exact on `nranks` ranks; else why not.
Status check_exact(DataType dtype, ReduceOp op, int nranks);
/// Writes rank `rank`'s input for an allreduce of `count` elements of `dtype` with `op`.
void fill_allreduce_input(void* buf, std::size_t count, DataType dtype, ReduceOp op, int rank,
                          int nranks);
/// Number of elements of `result` that differ bit for bit from the exact allreduce result.
std::int64_t count_allreduce_wrong(const void* result, std::size_t count, DataType dtype,
                                   ReduceOp op, int nranks);
/// Fills `count` elements of `buf` with a value no check accepts, so stale output is caught.
void poison(void* buf, std::size_t count, DataType dtype);

}  // namespace hoop::bench
