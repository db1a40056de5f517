// Argument checks shared by every collective. They run before any communication, so a bad
// argument on one rank returns invalid_argument there without touching the transport.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "hoop/communicator.h"

namespace hoop::collectives {

/// invalid_argument unless `dtype` is one of the declared DataType values.
Status check_dtype(DataType dtype);
/// invalid_argument unless `op` is one of the declared element-wise ReduceOp values (kAdasum
/// is allreduce's alone: see check_adasum).
Status check_op(ReduceOp op);
/// For an allreduce with kAdasum: invalid_argument unless `dtype` is floating-point and
/// `algorithm` (already checked) is kAuto or kRecursiveDoubling.
Status check_adasum(DataType dtype, Algorithm algorithm);
/// invalid_argument unless `algorithm` is one of the declared Algorithm values.
Status check_algorithm(Algorithm algorithm);
/// count * factor * dtype_size(dtype) in bytes, or invalid_argument naming `what` on overflow.
Result<std::size_t> checked_bytes(std::size_t count, std::size_t factor, DataType dtype,
                                  std::string_view what);
/// invalid_argument naming `name` when `ptr` is null but `count` > 0.
Status check_buffer(const void* ptr, std::size_t count, std::string_view name);
/// invalid_argument unless 0 <= root < size.
Status check_root(int root, int size);
/// The sum of `counts`, or invalid_argument naming `name` when it does not hold one entry per
/// rank or its byte total overflows.
Result<std::size_t> check_counts(std::span<const std::size_t> counts, int size, DataType dtype,
                                 std::string_view name);

}  // namespace hoop::collectives
