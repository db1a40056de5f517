// Argument checks shared by every collective. They run before any communication, so a bad
// argument on one rank returns invalid_argument there without touching the transport.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "hoop/communicator.h"

namespace hoop::collectives {

// The checks every call makes are inline: a call with good arguments pays a few compares and
// builds no Status it then destroys (an 8 B scatter spent about 200 instructions in them out of
// line). The failures are out of line and build the message.

/// check_dtype's failure.
[[gnu::cold]] Status dtype_failure(DataType dtype);
/// check_op's failure.
[[gnu::cold]] Status op_failure(ReduceOp op);
/// checked_bytes' failure.
[[gnu::cold]] Status bytes_failure(std::size_t count, std::size_t factor, DataType dtype,
                                   std::string_view what);
/// check_buffer's failure.
[[gnu::cold]] Status buffer_failure(std::size_t count, std::string_view name);
/// check_root's failure.
[[gnu::cold]] Status root_failure(int root, int size);

/// invalid_argument unless `dtype` is one of the declared DataType values.
inline Status check_dtype(DataType dtype) {
  if (static_cast<unsigned>(dtype) <= static_cast<unsigned>(DataType::kI16)) [[likely]]
    return Status::success();
  return dtype_failure(dtype);
}
/// invalid_argument unless `op` is one of the declared element-wise ReduceOp values (kAdasum
/// is allreduce's alone: see check_adasum).
inline Status check_op(ReduceOp op) {
  if (static_cast<unsigned>(op) < static_cast<unsigned>(ReduceOp::kAdasum)) [[likely]]
    return Status::success();
  return op_failure(op);
}
/// For an allreduce with kAdasum: invalid_argument unless `dtype` is floating-point and
/// `algorithm` (already checked) is kAuto or kRecursiveDoubling.
Status check_adasum(DataType dtype, Algorithm algorithm);
/// invalid_argument unless `algorithm` is one of the declared Algorithm values.
Status check_algorithm(Algorithm algorithm);
/// count * factor * dtype_size(dtype) in bytes, or invalid_argument naming `what` on overflow.
inline Result<std::size_t> checked_bytes(std::size_t count, std::size_t factor, DataType dtype,
                                         std::string_view what) {
  std::size_t elems = 0;
  std::size_t bytes = 0;
  if (!__builtin_mul_overflow(count, factor, &elems) &&
      !__builtin_mul_overflow(elems, dtype_size(dtype), &bytes)) [[likely]]
    return bytes;
  return bytes_failure(count, factor, dtype, what);
}
/// invalid_argument naming `name` when `ptr` is null but `count` > 0.
inline Status check_buffer(const void* ptr, std::size_t count, std::string_view name) {
  if (ptr != nullptr || count == 0) [[likely]]
    return Status::success();
  return buffer_failure(count, name);
}
/// invalid_argument unless 0 <= root < size.
inline Status check_root(int root, int size) {
  if (root >= 0 && root < size) [[likely]]
    return Status::success();
  return root_failure(root, size);
}
/// The sum of `counts`, or invalid_argument naming `name` when it does not hold one entry per
/// rank or its byte total overflows.
Result<std::size_t> check_counts(std::span<const std::size_t> counts, int size, DataType dtype,
                                 std::string_view name);

}  // namespace hoop::collectives
