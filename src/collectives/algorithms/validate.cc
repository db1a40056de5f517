#include "collectives/algorithms/validate.h"

#include <fmt/format.h>

#include <limits>

#include "collectives/algorithms/allreduce_table.h"

namespace hoop::collectives {

Status dtype_failure(DataType dtype) {
  return invalid_argument(fmt::format("dtype: unknown data type {}", static_cast<int>(dtype)));
}

Status op_failure(ReduceOp op) {
  if (op == ReduceOp::kAdasum)
    return invalid_argument("op: adasum combines whole vectors, so only allreduce takes it");
  return invalid_argument(fmt::format("op: unknown reduce op {}", static_cast<int>(op)));
}

Status check_adasum(DataType dtype, Algorithm algorithm) {
  if (!dtype_is_float(dtype))
    return invalid_argument(fmt::format(
        "op adasum needs a floating-point dtype (f16, bf16, f32, f64), not {}", dtype_name(dtype)));
  if (algorithm != Algorithm::kAuto && algorithm != Algorithm::kRecursiveDoubling)
    return invalid_argument(fmt::format(
        "op adasum runs its own pairwise exchange (recursive doubling), not the {} algorithm",
        algorithm_name(algorithm)));
  return Status::success();
}

Status check_algorithm(Algorithm algorithm) {
  if (algorithm != Algorithm::kAuto && find_allreduce(algorithm) == nullptr)
    return invalid_argument(
        fmt::format("algorithm: unknown algorithm {}", static_cast<int>(algorithm)));
  return Status::success();
}

Status bytes_failure(std::size_t count, std::size_t factor, DataType dtype, std::string_view what) {
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  if (factor != 0 && count > kMax / factor)
    return invalid_argument(fmt::format("{}: {} x {} elements overflow", what, count, factor));
  return invalid_argument(
      fmt::format("{}: {} elements of {} bytes overflow", what, count * factor, dtype_size(dtype)));
}

Status buffer_failure(std::size_t count, std::string_view name) {
  return invalid_argument(fmt::format("{}: null buffer for {} elements", name, count));
}

Status root_failure(int root, int size) {
  return invalid_argument(fmt::format("root: {} is not a rank of this {}-rank job", root, size));
}

Result<std::size_t> check_counts(std::span<const std::size_t> counts, int size, DataType dtype,
                                 std::string_view name) {
  if (counts.size() != static_cast<std::size_t>(size))
    return invalid_argument(
        fmt::format("{}: {} entries, expected one per rank ({})", name, counts.size(), size));
  std::size_t total = 0;
  for (std::size_t c : counts) {
    if (c > std::numeric_limits<std::size_t>::max() - total)
      return invalid_argument(fmt::format("{}: the sum of the counts overflows", name));
    total += c;
  }
  HOOP_RETURN_IF_ERROR(checked_bytes(total, 1, dtype, name).status());
  return total;
}

}  // namespace hoop::collectives
