// The training core in a build without CUDA: there is no GPU backend, so asking for one (a CUDA
// tensor, a model moved to a device) fails with the reason hoop::device gives.
#include "device/device.h"
#include "gpu.h"

namespace hoop::train::detail {

Gpu& gpu(int device) { throw unusable_device(device, device::unavailable_reason()); }

}  // namespace hoop::train::detail
