// The device reduction kernels: src/core/reduce_kernels_impl.h's arithmetic on a GPU, element
// for element, so that host and device reductions of the same inputs agree bit for bit.
//
// - f16/bf16 convert through core/half.h itself (its constexpr functions run on the device under
//   --expt-relaxed-constexpr), so rounding and NaN handling cannot drift from the CPU's; f16
//   numbers other than NaN take the equivalent hardware conversions (see Half).
// - Integer sum and prod run on the unsigned type of the same width (wrap-around is defined
//   there); i8 and u8 sums therefore share one kernel, as do i32/u32 and i64/u64.
// - One kernel per (dtype, op) serves reduce_into and reduce (reduce_into is reduce with
//   dst == a); the access width is a launch argument rather than a template parameter, which
//   keeps nvcc's work to 30 reduction kernels + 8 divide + 4 scale.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/half.h"
#include "device/kernels.h"

namespace hoop::device::kernels {
namespace {

using reduce_detail::OpKind;

// How one launch reaches memory, chosen from the pointers before the launch.
enum class Access : std::uint8_t {
  kVector,   // every pointer 16-byte aligned: 16-byte loads and stores, scalar tail
  kElement,  // every pointer aligned to the element size: one element per access
  kBytes,    // some pointer not even element-aligned (allowed, as on the CPU): byte accesses
};

// Stored type and compute type of a dtype, with the conversions between them.
template <class T>
struct Native {
  using Stored = T;
  using Compute = T;
  __device__ static T widen(T x) { return x; }
  __device__ static T narrow(T x) { return x; }
};

// The hardware conversions (cvt.f32.f16, cvt.rn.f16.f32) are exact, respectively round to
// nearest even, like half.h for every number, subnormals and overflow included, at a fraction
// of its integer instructions, which would otherwise bound the f16 kernels. NaNs take half.h's
// path so that their payloads follow the CPU's rule (hardware may return the canonical NaN).
// Both hold without --use_fast_math / -ftz=true, which hoop never sets.
struct Half {
  using Stored = std::uint16_t;
  using Compute = float;
  __device__ static float widen(std::uint16_t x) {
    if ((x & 0x7fffu) > 0x7c00u) return half_to_float(x);
    return __half2float(__ushort_as_half(x));
  }
  __device__ static std::uint16_t narrow(float x) {
    if (x != x) return float_to_half(x);
    return __half_as_ushort(__float2half_rn(x));
  }
};

struct BFloat16 {
  using Stored = std::uint16_t;
  using Compute = float;
  __device__ static float widen(std::uint16_t x) { return bf16_to_float(x); }
  __device__ static std::uint16_t narrow(float x) { return float_to_bf16(x); }
};

// Integer sum and prod compute in the unsigned type of the same width.
template <class Traits>
struct ArithOf {
  using type = Traits;
};
template <class T>
requires std::is_integral_v<T>
struct ArithOf<Native<T>> {
  using type = Native<std::make_unsigned_t<T>>;
};

// The casts drop the int that u8/i8 arithmetic promotes to, i.e. wrap modulo 2^8.
struct SumOp {
  template <class C>
  __device__ C operator()(C a, C b) const {
    return static_cast<C>(a + b);
  }
};

struct ProdOp {
  template <class C>
  __device__ C operator()(C a, C b) const {
    return static_cast<C>(a * b);
  }
};

// A NaN on either side wins, as on the CPU, so the answer does not depend on operand order.
struct MinOp {
  template <class C>
  __device__ C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return (a < b || a != a) ? a : b;
    } else {
      return a < b ? a : b;
    }
  }
};

struct MaxOp {
  template <class C>
  __device__ C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return (a > b || a != a) ? a : b;
    } else {
      return a > b ? a : b;
    }
  }
};

// Floats divide in their compute precision, integers truncate toward zero (as C++ does).
template <class C>
struct DivideBy {
  std::int64_t divisor;
  __device__ C operator()(C x) const {
    if constexpr (std::is_integral_v<C>) {
      return static_cast<C>(static_cast<std::int64_t>(x) / divisor);
    } else {
      return x / static_cast<C>(divisor);
    }
  }
};

template <class C>
struct ScaleBy {
  C factor;
  __device__ C operator()(C x) const { return x * factor; }
};

// Element i of a buffer; byte by byte when the address may not be a multiple of sizeof(S).
template <class S>
__device__ S load(const std::byte* p, std::size_t i, Access access) {
  if (access != Access::kBytes) return reinterpret_cast<const S*>(p)[i];
  S value;
  auto* out = reinterpret_cast<unsigned char*>(&value);
  const auto* in = reinterpret_cast<const unsigned char*>(p) + i * sizeof(S);
  for (std::size_t k = 0; k < sizeof(S); ++k) out[k] = in[k];
  return value;
}

template <class S>
__device__ void store(std::byte* p, std::size_t i, S value, Access access) {
  if (access != Access::kBytes) {
    reinterpret_cast<S*>(p)[i] = value;
    return;
  }
  const auto* in = reinterpret_cast<const unsigned char*>(&value);
  auto* out = reinterpret_cast<unsigned char*>(p) + i * sizeof(S);
  for (std::size_t k = 0; k < sizeof(S); ++k) out[k] = in[k];
}

// The elements of one 16-byte vector.
template <class S>
struct Lanes {
  static constexpr std::size_t kCount = sizeof(uint4) / sizeof(S);
  S value[kCount];
};

template <class S>
__device__ Lanes<S> load_lanes(const std::byte* p, std::size_t v) {
  const uint4 bits = reinterpret_cast<const uint4*>(p)[v];
  Lanes<S> lanes;
  std::memcpy(&lanes, &bits, sizeof bits);
  return lanes;
}

// dst[i] = narrow(fn(widen(srcs[i])...)) over a grid-stride loop. Each thread loads all its
// inputs before it stores, so dst may be one of srcs.
template <class Traits, class Fn, class... Srcs>
__device__ void transform(std::byte* dst, std::size_t count, Access access, Fn fn, Srcs... srcs) {
  using S = typename Traits::Stored;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t scalar_from = 0;
  if (access == Access::kVector) {
    const std::size_t vectors = count / Lanes<S>::kCount;
    for (std::size_t v = first; v < vectors; v += stride) {
      const auto combine = [&](const auto&... in) {
        Lanes<S> out;
        for (std::size_t k = 0; k < Lanes<S>::kCount; ++k) {
          out.value[k] = Traits::narrow(fn(Traits::widen(in.value[k])...));
        }
        return out;
      };
      const Lanes<S> out = combine(load_lanes<S>(srcs, v)...);
      uint4 bits;
      std::memcpy(&bits, &out, sizeof bits);
      reinterpret_cast<uint4*>(dst)[v] = bits;
    }
    scalar_from = vectors * Lanes<S>::kCount;
  }
  for (std::size_t i = scalar_from + first; i < count; i += stride) {
    store<S>(dst, i, Traits::narrow(fn(Traits::widen(load<S>(srcs, i, access))...)), access);
  }
}

template <class Traits, class Op>
__global__ void combine_kernel(std::byte* dst, const std::byte* a, const std::byte* b,
                               std::size_t count, Access access) {
  transform<Traits>(dst, count, access, Op{}, a, b);
}

template <class Traits>
__global__ void divide_kernel(std::byte* buf, std::size_t count, Access access,
                              std::int64_t divisor) {
  transform<Traits>(buf, count, access, DivideBy<typename Traits::Compute>{divisor},
                    static_cast<const std::byte*>(buf));
}

template <class Traits>
__global__ void scale_kernel(std::byte* buf, std::size_t count, Access access,
                             typename Traits::Compute factor) {
  transform<Traits>(buf, count, access, ScaleBy<typename Traits::Compute>{factor},
                    static_cast<const std::byte*>(buf));
}

template <class... Ptrs>
Access access_for(std::size_t element_size, Ptrs... ptrs) {
  const auto aligned = [&](std::size_t to) {
    return ((reinterpret_cast<std::uintptr_t>(ptrs) % to == 0) && ...);
  };
  if (aligned(sizeof(uint4))) return Access::kVector;
  if (aligned(element_size)) return Access::kElement;
  return Access::kBytes;
}

constexpr unsigned kThreads = 256;
constexpr int kMaxCachedDevices = 64;

// Multiprocessors of the current device, asked once per device: a grid of one full wave
// (2048 threads per SM) is enough for a grid-stride loop to saturate memory.
cudaError_t max_blocks(unsigned* blocks) {
  static std::atomic<int> cached[kMaxCachedDevices];
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  int sms = device < kMaxCachedDevices ? cached[device].load(std::memory_order_relaxed) : 0;
  if (sms == 0) {
    if (const cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
        e != cudaSuccess) {
      return e;
    }
    if (device < kMaxCachedDevices) cached[device].store(sms, std::memory_order_relaxed);
  }
  *blocks = static_cast<unsigned>(std::max(sms, 1)) * (2048 / kThreads);
  return cudaSuccess;
}

// One thread per vector (or element), capped at one full wave; the loops stride over the rest.
template <class Traits>
cudaError_t configure(std::size_t count, Access access, cudaStream_t stream,
                      cudaLaunchConfig_t* config) {
  unsigned blocks = 0;
  if (const cudaError_t e = max_blocks(&blocks); e != cudaSuccess) return e;
  const std::size_t per_thread =
      access == Access::kVector ? Lanes<typename Traits::Stored>::kCount : 1;
  const std::size_t needed = (count / per_thread + kThreads) / kThreads;
  *config = cudaLaunchConfig_t{};
  config->gridDim = dim3(static_cast<unsigned>(std::min<std::size_t>(needed, blocks)));
  config->blockDim = dim3(kThreads);
  config->stream = stream;
  return cudaSuccess;
}

template <class Traits, class Op>
cudaError_t launch_combine(void* dst, const void* a, const void* b, std::size_t count,
                           cudaStream_t stream) {
  const Access access = access_for(sizeof(typename Traits::Stored), dst, a, b);
  cudaLaunchConfig_t config;
  if (const cudaError_t e = configure<Traits>(count, access, stream, &config); e != cudaSuccess) {
    return e;
  }
  return cudaLaunchKernelEx(&config, combine_kernel<Traits, Op>, static_cast<std::byte*>(dst),
                            static_cast<const std::byte*>(a), static_cast<const std::byte*>(b),
                            count, access);
}

// An in-place kernel over one buffer: divide_kernel or scale_kernel, with its one extra argument.
template <class Traits, class Arg>
cudaError_t launch_in_place(void (*kernel)(std::byte*, std::size_t, Access, Arg), void* buf,
                            std::size_t count, Arg arg, cudaStream_t stream) {
  const Access access = access_for(sizeof(typename Traits::Stored), buf);
  cudaLaunchConfig_t config;
  if (const cudaError_t e = configure<Traits>(count, access, stream, &config); e != cudaSuccess) {
    return e;
  }
  return cudaLaunchKernelEx(&config, kernel, static_cast<std::byte*>(buf), count, access, arg);
}

// Calls visit(Traits{}) with the traits of `dtype`.
template <class Visit>
cudaError_t with_traits(DataType dtype, Visit visit) {
  switch (dtype) {
    case DataType::kU8:
      return visit(Native<std::uint8_t>{});
    case DataType::kI8:
      return visit(Native<std::int8_t>{});
    case DataType::kI16:
      return visit(Native<std::int16_t>{});
    case DataType::kI32:
      return visit(Native<std::int32_t>{});
    case DataType::kI64:
      return visit(Native<std::int64_t>{});
    case DataType::kF16:
      return visit(Half{});
    case DataType::kBF16:
      return visit(BFloat16{});
    case DataType::kF32:
      return visit(Native<float>{});
    case DataType::kF64:
      return visit(Native<double>{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t combine(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                    OpKind op, cudaStream_t stream) {
  return with_traits(dtype, [&]<class Traits>(Traits) {
    using Arith = typename ArithOf<Traits>::type;
    switch (op) {
      case OpKind::kSum:
        return launch_combine<Arith, SumOp>(dst, a, b, count, stream);
      case OpKind::kProd:
        return launch_combine<Arith, ProdOp>(dst, a, b, count, stream);
      case OpKind::kMin:
        return launch_combine<Traits, MinOp>(dst, a, b, count, stream);
      case OpKind::kMax:
        return launch_combine<Traits, MaxOp>(dst, a, b, count, stream);
    }
    return cudaErrorInvalidValue;
  });
}

cudaError_t divide(void* buf, std::size_t count, DataType dtype, std::int64_t divisor,
                   cudaStream_t stream) {
  return with_traits(dtype, [&]<class Traits>(Traits) {
    return launch_in_place<Traits>(divide_kernel<Traits>, buf, count, divisor, stream);
  });
}

cudaError_t scale(void* buf, std::size_t count, DataType dtype, double factor,
                  cudaStream_t stream) {
  return with_traits(dtype, [&]<class Traits>(Traits) {
    using C = typename Traits::Compute;
    if constexpr (std::is_floating_point_v<C>) {
      return launch_in_place<Traits>(scale_kernel<Traits>, buf, count, static_cast<C>(factor),
                                     stream);
    } else {
      return cudaErrorInvalidValue;
    }
  });
}

}  // namespace hoop::device::kernels
