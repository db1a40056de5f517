// The portable kernel variant: runs on any CPU this library was compiled for.
#include "core/reduce_kernels_impl.h"

namespace hoop::reduce_detail {

const KernelTable& generic_kernels() { return kKernelTable; }

}  // namespace hoop::reduce_detail
