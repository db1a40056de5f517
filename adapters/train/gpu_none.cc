// The training core in a build without CUDA: there is no GPU backend, so asking for one (a CUDA
// tensor, a model moved to a device) fails with the reason hoop gives (cuda_unavailable_reason).
#include "gpu.h"
#include "hoop/hoop.h"

namespace hoop::train::detail {

Gpu& gpu(int device) { throw unusable_device(device, cuda_unavailable_reason()); }

}  // namespace hoop::train::detail
