// The AVX2 + FMA + F16C kernel variant. Only its kernels are compiled for that target (see
// reduce_kernels_impl.h), so the library still loads on any x86-64 CPU; reduce.cc runs them only
// after checking the CPU.
#if defined(__x86_64__) || defined(__i386__)

#define HOOP_REDUCE_AVX2 1
#include "core/reduce_kernels_impl.h"

namespace hoop::reduce_detail {

const KernelTable* avx2_kernels() { return &kKernelTable; }

}  // namespace hoop::reduce_detail

#else

#include "core/reduce_kernels.h"

namespace hoop::reduce_detail {

const KernelTable* avx2_kernels() { return nullptr; }

}  // namespace hoop::reduce_detail

#endif
