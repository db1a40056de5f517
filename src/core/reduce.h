// Element-wise reduction kernels: the arithmetic every collective applies to received chunks.
//
// The results are the same on every CPU variant, so all ranks and all algorithms agree bit for
// bit when they combine the same inputs in the same order:
// - kAvg reduces exactly like kSum. Averaging is a sum followed by one divide() once every
//   contribution is in; dividing at each step would round more and differ between algorithms.
// - Integers: sum and prod wrap modulo 2^bits (two's complement, no undefined behaviour);
//   min and max compare u8 as unsigned and i8/i32/i64 as signed.
// - f32/f64: sum and prod are plain IEEE arithmetic, so Inf and NaN propagate. min and max
//   return NaN when either operand is NaN (unlike std::min or fmin, whose answer depends on the
//   operand order or drops the NaN), so the result does not depend on which rank came first.
//   -0.0 and +0.0 compare equal; min/max may return either of them.
// - f16/bf16 accumulate in f32: each element is widened to f32, combined, and rounded back to
//   nearest even; a chain of reductions therefore rounds once per step.
// - Buffers need no alignment: any byte address works for every dtype.
// - count == 0 is ok with any pointers, null included. A null pointer with count > 0, an unknown
//   dtype or op (also with count == 0), partially overlapping buffers, or a byte size that does
//   not fit std::size_t is an invalid_argument status; nothing is written then.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "hoop/core.h"

namespace hoop {

/// Accumulates `src` into `dst`: dst[i] = op(dst[i], src[i]). dst == src is allowed; any other
/// overlap is invalid_argument.
Status reduce_into(void* dst, const void* src, std::size_t count, DataType dtype, ReduceOp op);

/// Combines two inputs into a third buffer: dst[i] = op(a[i], b[i]). dst may be exactly a or b
/// (in-place); a partial overlap of dst with an input is invalid_argument.
Status reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
              ReduceOp op);

/// Finishes a kAvg reduction: buf[i] /= divisor. Floats divide in their own precision (f16 and
/// bf16 through f32, rounded back to nearest even); integers divide truncating toward zero.
/// A divisor below 1 is invalid_argument.
Status divide(void* buf, std::size_t count, DataType dtype, std::int64_t divisor);

/// dst = op over `inputs` (one per rank, `count` elements each, read from `offset` bytes into
/// each) in rank order, op(op(in[0], in[1]), in[2])..., divided by inputs.size() for kAvg: every
/// rank that combines the same inputs gets the same bits, whatever path carried them. One input
/// is copied; none is invalid_argument. dst may be one of the inputs only where it is in[0].
Status reduce_in_rank_order(void* dst, std::span<const std::byte* const> inputs, std::size_t count,
                            DataType dtype, ReduceOp op, std::size_t offset = 0);

/// Instruction-set variants of the kernels; every variant computes bit-identical results.
enum class ReduceIsa : std::uint8_t {
  kGeneric,  // portable code (SSE2-width vectors on x86-64), runs on any CPU
  kAvx2,     // AVX2 + FMA + F16C (x86-64 since Haswell / Zen)
};

/// Short name of `isa` ("generic", "avx2") for test and benchmark labels.
std::string_view reduce_isa_name(ReduceIsa isa);

/// Whether this CPU (and this build) can run the kernels of `isa`.
bool reduce_isa_supported(ReduceIsa isa);

/// The variant in use: the best supported one, chosen once at first use, unless overridden.
ReduceIsa reduce_isa();

/// Switches every later call, process-wide, to `isa`, so tests and benchmarks can compare
/// variants on one machine; invalid_argument when `isa` is unknown or unsupported here.
Status set_reduce_isa(ReduceIsa isa);

}  // namespace hoop
