// Argument checks and variant dispatch for the reduction kernels; the loops live in
// reduce_kernels_impl.h.
#include "core/reduce.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "core/reduce_checks.h"
#include "core/reduce_kernels.h"

namespace hoop {
namespace {

using reduce_detail::KernelTable;
using reduce_detail::op_kind;
using reduce_detail::OpKind;

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  // libgcc also checks that the OS saves the YMM registers. Each feature is asked for on its
  // own because a hypervisor can hide any one of them.
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

const KernelTable* table_for(ReduceIsa isa) {
  switch (isa) {
    case ReduceIsa::kGeneric:
      return &reduce_detail::generic_kernels();
    case ReduceIsa::kAvx2:
      return cpu_has_avx2() ? reduce_detail::avx2_kernels() : nullptr;
  }
  return nullptr;
}

// Chosen once; set_reduce_isa may swap it. Kernels are stateless, so a relaxed load suffices.
std::atomic<const KernelTable*>& active_table() {
  static std::atomic<const KernelTable*> table{[] {
    const KernelTable* best = table_for(ReduceIsa::kAvx2);
    return best != nullptr ? best : table_for(ReduceIsa::kGeneric);
  }()};
  return table;
}

void run(void* dst, const void* a, const void* b, std::size_t count, DataType dtype, ReduceOp op) {
  const KernelTable* table = active_table().load(std::memory_order_relaxed);
  table->dtype[static_cast<std::size_t>(dtype)].reduce[static_cast<std::size_t>(op_kind(op))](
      static_cast<std::byte*>(dst), static_cast<const std::byte*>(a),
      static_cast<const std::byte*>(b), count);
}

}  // namespace

namespace reduce_detail {
namespace {

bool valid_dtype(DataType dtype) { return static_cast<std::size_t>(dtype) < kDataTypeCount; }

Status check_enums(std::string_view fn, DataType dtype, ReduceOp op) {
  HOOP_RETURN_IF_ERROR(check_dtype(fn, dtype));
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
    case ReduceOp::kMin:
    case ReduceOp::kMax:
    case ReduceOp::kProd:
      return Status::success();
    case ReduceOp::kAdasum:
      // Whole vectors, not elements: adasum_into (core/adasum.h) combines them.
      return invalid_argument(fmt::format("{}: adasum is not an element-wise op", fn));
  }
  return invalid_argument(fmt::format("{}: unknown op value {}", fn, static_cast<int>(op)));
}

Status check_pointer(std::string_view fn, std::string_view name, const void* p, std::size_t count) {
  if (p == nullptr) {
    return invalid_argument(fmt::format("{}: {} is null with count {}", fn, name, count));
  }
  return Status::success();
}

Status byte_size(std::string_view fn, std::size_t count, DataType dtype, std::size_t* bytes) {
  const std::size_t size = dtype_size(dtype);
  if (count > std::numeric_limits<std::size_t>::max() / size) {
    return invalid_argument(
        fmt::format("{}: count {} of {} does not fit in memory", fn, count, dtype_name(dtype)));
  }
  *bytes = count * size;
  return Status::success();
}

// Exact aliasing is in-place and fine; a shifted overlap would read bytes already written.
bool partially_overlaps(const void* dst, const void* src, std::size_t bytes) {
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  return d != s && d < s + bytes && s < d + bytes;
}

Status check_overlap(std::string_view fn, std::string_view name, const void* dst, const void* src,
                     std::size_t bytes) {
  if (partially_overlaps(dst, src, bytes)) {
    return invalid_argument(fmt::format("{}: dst partially overlaps {}", fn, name));
  }
  return Status::success();
}

/// Whether reduce's arguments (reduce_into's with a = dst) pass check_reduce: the same tests as
/// booleans, inline, for the common case.
inline bool reduce_args_ok(const void* dst, const void* a, const void* b, std::size_t count,
                           DataType dtype, ReduceOp op) {
  if (!valid_dtype(dtype) || static_cast<unsigned>(op) >= static_cast<unsigned>(ReduceOp::kAdasum))
    return false;
  if (count == 0) return true;
  std::size_t bytes = 0;
  if (dst == nullptr || a == nullptr || b == nullptr ||
      __builtin_mul_overflow(count, dtype_size(dtype), &bytes))
    return false;
  return !partially_overlaps(dst, a, bytes) && !partially_overlaps(dst, b, bytes);
}

}  // namespace

OpKind op_kind(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin:
      return OpKind::kMin;
    case ReduceOp::kMax:
      return OpKind::kMax;
    case ReduceOp::kProd:
      return OpKind::kProd;
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
    case ReduceOp::kAdasum:  // refused by check_enums before any kernel runs
      break;
  }
  return OpKind::kSum;
}

Status check_dtype(std::string_view fn, DataType dtype) {
  if (valid_dtype(dtype)) return Status::success();
  return invalid_argument(fmt::format("{}: unknown dtype value {}", fn, static_cast<int>(dtype)));
}

Status check_buffer(std::string_view fn, std::string_view name, const void* buf, std::size_t count,
                    DataType dtype) {
  if (count == 0) return Status::success();
  HOOP_RETURN_IF_ERROR(check_pointer(fn, name, buf, count));
  std::size_t bytes = 0;
  return byte_size(fn, count, dtype, &bytes);
}

Status check_reduce_into(std::string_view fn, const void* dst, const void* src, std::size_t count,
                         DataType dtype, ReduceOp op) {
  HOOP_RETURN_IF_ERROR(check_enums(fn, dtype, op));
  if (count == 0) return Status::success();
  HOOP_RETURN_IF_ERROR(check_pointer(fn, "dst", dst, count));
  HOOP_RETURN_IF_ERROR(check_pointer(fn, "src", src, count));
  std::size_t bytes = 0;
  HOOP_RETURN_IF_ERROR(byte_size(fn, count, dtype, &bytes));
  return check_overlap(fn, "src", dst, src, bytes);
}

Status check_reduce(std::string_view fn, const void* dst, const void* a, const void* b,
                    std::size_t count, DataType dtype, ReduceOp op) {
  HOOP_RETURN_IF_ERROR(check_enums(fn, dtype, op));
  if (count == 0) return Status::success();
  HOOP_RETURN_IF_ERROR(check_pointer(fn, "dst", dst, count));
  HOOP_RETURN_IF_ERROR(check_pointer(fn, "a", a, count));
  HOOP_RETURN_IF_ERROR(check_pointer(fn, "b", b, count));
  std::size_t bytes = 0;
  HOOP_RETURN_IF_ERROR(byte_size(fn, count, dtype, &bytes));
  HOOP_RETURN_IF_ERROR(check_overlap(fn, "a", dst, a, bytes));
  return check_overlap(fn, "b", dst, b, bytes);
}

Status check_divide(std::string_view fn, const void* buf, std::size_t count, DataType dtype,
                    std::int64_t divisor) {
  HOOP_RETURN_IF_ERROR(check_dtype(fn, dtype));
  if (divisor < 1) {
    return invalid_argument(fmt::format("{}: divisor must be >= 1, got {}", fn, divisor));
  }
  return check_buffer(fn, "buf", buf, count, dtype);
}

}  // namespace reduce_detail

// The checks that name a bad argument run only where the quick test finds one: a small
// reduction (a 2-rank reduce of 8 B) spent more instructions checking than reducing.

Status reduce_into(void* dst, const void* src, std::size_t count, DataType dtype, ReduceOp op) {
  if (!reduce_detail::reduce_args_ok(dst, dst, src, count, dtype, op)) [[unlikely]]
    HOOP_RETURN_IF_ERROR(
        reduce_detail::check_reduce_into("reduce_into", dst, src, count, dtype, op));
  if (count > 0) run(dst, dst, src, count, dtype, op);
  return Status::success();
}

Status reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
              ReduceOp op) {
  if (!reduce_detail::reduce_args_ok(dst, a, b, count, dtype, op)) [[unlikely]]
    HOOP_RETURN_IF_ERROR(reduce_detail::check_reduce("reduce", dst, a, b, count, dtype, op));
  if (count > 0) run(dst, a, b, count, dtype, op);
  return Status::success();
}

Status divide(void* buf, std::size_t count, DataType dtype, std::int64_t divisor) {
  HOOP_RETURN_IF_ERROR(reduce_detail::check_divide("divide", buf, count, dtype, divisor));
  if (count == 0) return Status::success();
  const KernelTable* table = active_table().load(std::memory_order_relaxed);
  table->dtype[static_cast<std::size_t>(dtype)].divide(static_cast<std::byte*>(buf), count,
                                                       divisor);
  return Status::success();
}

Status reduce_in_rank_order(void* dst, std::span<const std::byte* const> inputs, std::size_t count,
                            DataType dtype, ReduceOp op, std::size_t offset) {
  if (inputs.empty()) return invalid_argument("reduce_in_rank_order: no inputs");
  if (inputs.size() == 1) {
    const std::byte* only = inputs[0] + offset;
    if (dst != only && count > 0) std::memmove(dst, only, count * dtype_size(dtype));
    return Status::success();
  }
  HOOP_RETURN_IF_ERROR(reduce(dst, inputs[0] + offset, inputs[1] + offset, count, dtype, op));
  for (std::size_t r = 2; r < inputs.size(); ++r)
    HOOP_RETURN_IF_ERROR(reduce_into(dst, inputs[r] + offset, count, dtype, op));
  if (op == ReduceOp::kAvg)
    return divide(dst, count, dtype, static_cast<std::int64_t>(inputs.size()));
  return Status::success();
}

std::string_view reduce_isa_name(ReduceIsa isa) {
  switch (isa) {
    case ReduceIsa::kGeneric:
      return "generic";
    case ReduceIsa::kAvx2:
      return "avx2";
  }
  return "unknown";
}

bool reduce_isa_supported(ReduceIsa isa) { return table_for(isa) != nullptr; }

ReduceIsa reduce_isa() {
  const KernelTable* table = active_table().load(std::memory_order_relaxed);
  return table == table_for(ReduceIsa::kAvx2) ? ReduceIsa::kAvx2 : ReduceIsa::kGeneric;
}

Status set_reduce_isa(ReduceIsa isa) {
  const KernelTable* table = table_for(isa);
  if (table == nullptr) {
    return invalid_argument(fmt::format("set_reduce_isa: {} (value {}) is not supported here",
                                        reduce_isa_name(isa), static_cast<int>(isa)));
  }
  active_table().store(table, std::memory_order_relaxed);
  return Status::success();
}

}  // namespace hoop
