// The body of the reduction kernels, compiled once per instruction-set variant.
//
// A variant's .cc file optionally defines HOOP_REDUCE_AVX2, includes this header exactly once,
// and exposes kKernelTable. Everything here lives in an anonymous namespace: each variant gets
// its own copies, so the linker can never merge an AVX2-compiled inline function into code that
// runs on a CPU without AVX2. For the same reason every other header is included before the
// target pragma, which then applies to the kernels only.
//
// The loops use GCC vector extensions: one source for every width, lowered to AVX2 or SSE2 by
// the target. Loads and stores go through std::memcpy on byte pointers, which compiles to
// unaligned vector moves and keeps misaligned buffers free of undefined behaviour.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/half.h"
#include "core/reduce_kernels.h"
#include "hoop/core.h"

#if defined(HOOP_REDUCE_AVX2)
#include <immintrin.h>
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace hoop::reduce_detail {
namespace {

#if defined(HOOP_REDUCE_AVX2)
constexpr std::size_t kVectorBytes = 32;
#else
constexpr std::size_t kVectorBytes = 16;
#endif

// Reinterprets a vector's bits. Not std::bit_cast: that template is defined outside the target
// pragma, so a 32-byte vector would cross a non-AVX function boundary.
template <class To, class From>
To bits_as(From from) {
  return __builtin_bit_cast(To, from);
}

template <class T, std::size_t kLanes>
struct VecOf {
  using type [[gnu::vector_size(kLanes * sizeof(T))]] = T;
};

// One vector at any byte address: an unaligned vector move. Copy vectors one at a time; GCC
// turns a memcpy into an array of vectors into a round trip through the stack.
template <class V>
V load_vector(const std::byte* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class V>
void store_vector(std::byte* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// One loop step: kParts vectors of the compute type, combined part by part.
template <class V, std::size_t kPartCount>
struct VectorBlock {
  static constexpr std::size_t kParts = kPartCount;
  V part[kPartCount];
};

// A codec moves one Block between memory and registers. Elem is the compute element type,
// kElemBytes the size of one stored element.
template <class E, std::size_t kStoredBytes, std::size_t kParts>
struct CodecBase {
  using Elem = E;
  static constexpr std::size_t kElemBytes = kStoredBytes;
  static constexpr std::size_t kLanes = kVectorBytes / sizeof(E);
  static constexpr std::size_t kStepBytes = kParts * kLanes * kStoredBytes;
  using Value = typename VecOf<E, kLanes>::type;
  using Block = VectorBlock<Value, kParts>;
};

// Storage and compute type coincide: a block is its bytes. Two vectors per step keep two
// independent load/op/store chains in flight.
template <class T>
struct NativeCodec : CodecBase<T, sizeof(T), 2> {
  using typename NativeCodec::CodecBase::Block;
  using typename NativeCodec::CodecBase::Value;
  static Block load(const std::byte* p) {
    Block b;
    for (std::size_t k = 0; k < Block::kParts; ++k) {
      b.part[k] = load_vector<Value>(p + k * sizeof(Value));
    }
    return b;
  }
  static void store(std::byte* p, const Block& b) {
    for (std::size_t k = 0; k < Block::kParts; ++k) {
      store_vector(p + k * sizeof(Value), b.part[k]);
    }
  }
};

// The 16-bit formats compute in f32 lanes, two vectors per step.
struct HalfCodecBase : CodecBase<float, 2, 2> {
  using Bits = VecOf<std::uint32_t, kLanes>::type;
  using Ints = VecOf<std::int32_t, kLanes>::type;
};

// bf16 is loaded as 32-bit words holding two elements each: the low halves form part 0, the
// high halves part 1. Splitting and merging are then shifts and masks, with no shuffles, and
// the element order in memory is kept whatever the byte order.
struct Bf16Codec : HalfCodecBase {
  static Block load(const std::byte* p) {
    const Bits words = load_vector<Bits>(p);
    return {{bits_as<Value>(words << 16), bits_as<Value>(words & 0xffff0000u)}};
  }
  static void store(std::byte* p, const Block& b) {
    const Bits words = (round_high(b.part[0]) >> 16) | (round_high(b.part[1]) & 0xffff0000u);
    store_vector(p, words);
  }
  // bf16 is the top half of an f32: round to nearest even into the top 16 bits (the rule of
  // float_to_bf16). A NaN gets the quiet bit instead, so it cannot round into Inf.
  static Bits round_high(Value v) {
    const Bits bits = bits_as<Bits>(v);
    return v != v ? (bits | 0x400000u) : bits + 0x7fffu + ((bits >> 16) & 1u);
  }
};

#if defined(HOOP_REDUCE_AVX2)
// F16C converts eight f16 values per instruction, rounding to nearest even like float_to_half.
struct F16Codec : HalfCodecBase {
  static Block load(const std::byte* p) {
    return {{_mm256_cvtph_ps(load_vector<__m128i>(p)),
             _mm256_cvtph_ps(load_vector<__m128i>(p + sizeof(__m128i)))}};
  }
  static void store(std::byte* p, const Block& b) {
    store_vector(p, _mm256_cvtps_ph(b.part[0], _MM_FROUND_TO_NEAREST_INT));
    store_vector(p + sizeof(__m128i), _mm256_cvtps_ph(b.part[1], _MM_FROUND_TO_NEAREST_INT));
  }
};
#else
// Without F16C: half_to_float and float_to_half (half.h) written branch-free over whole
// vectors, split into words like bf16. Bit-identical to the scalar code (tested exhaustively).
struct F16Codec : HalfCodecBase {
  static Block load(const std::byte* p) {
    const Bits words = load_vector<Bits>(p);
    return {{widen(words & 0xffffu), widen(words >> 16)}};
  }
  static void store(std::byte* p, const Block& b) {
    const Bits words = narrow(b.part[0]) | (narrow(b.part[1]) << 16);
    store_vector(p, words);
  }
  static Value widen(Bits h) {
    const Bits sign = (h & 0x8000u) << 16;
    const Bits magnitude = h & 0x7fffu;
    Bits normal = (magnitude << 13) + ((127u - 15u) << 23);
    normal = magnitude >= 0x7c00u ? normal + ((128u - 16u) << 23) : normal;  // Inf, NaN
    // Subnormal or zero: mantissa * 2^-24, exact in f32.
    const Value scaled = __builtin_convertvector(bits_as<Ints>(magnitude), Value) * 0x1p-24f;
    return bits_as<Value>(sign | (magnitude < 0x400u ? bits_as<Bits>(scaled) : normal));
  }
  static Bits narrow(Value v) {
    const Bits bits = bits_as<Bits>(v);
    const Bits magnitude = bits & 0x7fffffffu;
    const Bits normal =
        (magnitude + 0xfffu + ((magnitude >> 13) & 1u) - ((127u - 15u) << 23)) >> 13;
    // Subnormal results count units of 2^-24. Scaling by 2^24, truncating and taking the
    // fraction are all exact, so rounding to nearest even here needs no rounding mode.
    Value units = bits_as<Value>(magnitude) * 0x1p24f;
    units = units < 2048.0f ? units : Value{};  // NaN, Inf and large values take other paths
    const Ints whole = __builtin_convertvector(units, Ints);
    const Value fraction = units - __builtin_convertvector(whole, Value);
    const Ints round_up = (fraction > 0.5f) | ((fraction == 0.5f) & ((whole & 1) != 0));
    Bits out = magnitude < 0x38800000u ? bits_as<Bits>(whole - round_up) : normal;
    out = magnitude >= 0x477ff000u ? Bits{} + 0x7c00u : out;  // overflow and Inf
    out = magnitude > 0x7f800000u ? 0x7e00u | ((magnitude >> 13) & 0x3ffu) : out;  // quiet NaN
    return ((bits >> 16) & 0x8000u) | out;
  }
};
#endif

template <class V>
constexpr bool kIsFloatVector = std::is_floating_point_v<std::remove_cvref_t<decltype(V{}[0])>>;

struct SumOp {
  template <class V>
  V operator()(V a, V b) const {
    return a + b;
  }
};

struct ProdOp {
  template <class V>
  V operator()(V a, V b) const {
    return a * b;
  }
};

// min/max: a NaN on either side wins, so the answer does not depend on operand order.
struct MinOp {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (kIsFloatVector<V>) {
      return ((a < b) | (a != a)) ? a : b;
    } else {
      return a < b ? a : b;
    }
  }
};

struct MaxOp {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (kIsFloatVector<V>) {
      return ((a > b) | (a != a)) ? a : b;
    } else {
      return a > b ? a : b;
    }
  }
};

// Combines blocks part by part.
template <class Fn, class B, class... Bs>
B apply_parts(Fn fn, const B& first, const Bs&... rest) {
  B out;
  for (std::size_t k = 0; k < B::kParts; ++k) out.part[k] = fn(first.part[k], rest.part[k]...);
  return out;
}

// Loads the last, partial block of `src` from a zero-padded copy.
template <class Codec>
typename Codec::Block load_tail(const std::byte* src, std::size_t rest) {
  std::byte padded[Codec::kStepBytes] = {};
  std::memcpy(padded, src, rest);
  return Codec::load(padded);
}

// dst = fn(srcs...) one block at a time. The tail runs through the same code on zero-padded
// copies, so it converts and rounds exactly like the body; dst may be one of srcs because each
// block is loaded before the same bytes are stored.
template <class Codec, class Fn, class... Srcs>
void transform(std::byte* dst, std::size_t count, Fn fn, Srcs... srcs) {
  constexpr std::size_t kStep = Codec::kStepBytes;
  const std::size_t bytes = count * Codec::kElemBytes;
  const std::size_t body = bytes - bytes % kStep;
  for (std::size_t i = 0; i < body; i += kStep) {
    Codec::store(dst + i, apply_parts(fn, Codec::load(srcs + i)...));
  }
  const std::size_t rest = bytes - body;
  if (rest == 0) return;
  std::byte out[kStep];
  Codec::store(out, apply_parts(fn, load_tail<Codec>(srcs + body, rest)...));
  std::memcpy(dst + body, out, rest);
}

template <class Codec, class Op>
void reduce_kernel(std::byte* dst, const std::byte* a, const std::byte* b, std::size_t count) {
  transform<Codec>(dst, count, Op{}, a, b);
}

// A functor, not a lambda: a lambda's body is created when the template is instantiated, at the
// end of the file and thus outside the target pragma, and would lose the AVX2 target.
template <class V>
struct DivideBy {
  V divisor;
  V operator()(V x) const { return x / divisor; }
};

template <class Codec>
void divide_float(std::byte* buf, std::size_t count, std::int64_t divisor) {
  using Value = typename Codec::Value;
  const DivideBy<Value> fn{Value{} + static_cast<typename Codec::Elem>(divisor)};
  transform<Codec>(buf, count, fn, static_cast<const std::byte*>(buf));
}

// Integer division has no vector instruction; this runs once per averaged buffer.
template <class T>
void divide_integer(std::byte* buf, std::size_t count, std::int64_t divisor) {
  for (std::size_t i = 0; i < count; ++i) {
    T x;
    std::memcpy(&x, buf + i * sizeof(T), sizeof x);
    x = static_cast<T>(static_cast<std::int64_t>(x) / divisor);  // C++ truncates toward zero
    std::memcpy(buf + i * sizeof(T), &x, sizeof x);
  }
}

// Integer sum and prod run on the unsigned type of the same width: identical bits in two's
// complement, and wrap-around is defined behaviour there.
template <class Codec, bool = std::is_integral_v<typename Codec::Elem>>
struct ArithOf {
  using type = Codec;
};
template <class Codec>
struct ArithOf<Codec, true> {
  using type = NativeCodec<std::make_unsigned_t<typename Codec::Elem>>;
};
template <class Codec>
using ArithCodec = typename ArithOf<Codec>::type;

template <class Codec>
constexpr DtypeKernels kernels_for() {
  DtypeKernels k{};
  k.reduce[static_cast<std::size_t>(OpKind::kSum)] = &reduce_kernel<ArithCodec<Codec>, SumOp>;
  k.reduce[static_cast<std::size_t>(OpKind::kMin)] = &reduce_kernel<Codec, MinOp>;
  k.reduce[static_cast<std::size_t>(OpKind::kMax)] = &reduce_kernel<Codec, MaxOp>;
  k.reduce[static_cast<std::size_t>(OpKind::kProd)] = &reduce_kernel<ArithCodec<Codec>, ProdOp>;
  if constexpr (std::is_integral_v<typename Codec::Elem>) {
    k.divide = &divide_integer<typename Codec::Elem>;
  } else {
    k.divide = &divide_float<Codec>;
  }
  return k;
}

constexpr KernelTable make_kernel_table() {
  KernelTable t{};
  auto row = [&t](DataType dtype) -> DtypeKernels& {
    return t.dtype[static_cast<std::size_t>(dtype)];
  };
  row(DataType::kU8) = kernels_for<NativeCodec<std::uint8_t>>();
  row(DataType::kI8) = kernels_for<NativeCodec<std::int8_t>>();
  row(DataType::kI16) = kernels_for<NativeCodec<std::int16_t>>();
  row(DataType::kI32) = kernels_for<NativeCodec<std::int32_t>>();
  row(DataType::kI64) = kernels_for<NativeCodec<std::int64_t>>();
  row(DataType::kF16) = kernels_for<F16Codec>();
  row(DataType::kBF16) = kernels_for<Bf16Codec>();
  row(DataType::kF32) = kernels_for<NativeCodec<float>>();
  row(DataType::kF64) = kernels_for<NativeCodec<double>>();
  return t;
}

constexpr KernelTable kKernelTable = make_kernel_table();

}  // namespace
}  // namespace hoop::reduce_detail

#if defined(HOOP_REDUCE_AVX2)
#pragma GCC pop_options
#endif
