// The cuda entry of the transport registry (CUDA IPC between the processes of one host, for
// device buffers): compiled in every build, so that a build without CUDA still names it. Never
// a host transport: the device path (HOOP_GPU_BACKEND=hoop) connects it by name.
#include "transports/registry.h"
#ifdef HOOP_HAVE_CUDA_TRANSPORT
#include <fmt/format.h>

#include "device/device.h"
#include "transports/cuda/cuda_transport.h"
#endif

namespace hoop::cuda {
namespace {

#ifdef HOOP_HAVE_CUDA_TRANSPORT
Result<std::unique_ptr<Transport>> connect_spec(const transports::ConnectSpec& s) {
  return connect_for_communicator(*s.info, *s.store, s.key_prefix, s.device);
}

// Usable where the CUDA runtime finds a device.
transports::Probe probe() {
  if (device::device_count() == 0)
    return {false, fmt::format("built, but no usable device: {}", device::unavailable_reason())};
  return {true, device::describe()};
}
#endif

const bool registered = [] {
  transports::TransportEntry e;
  e.name = "cuda";
#ifdef HOOP_HAVE_CUDA_TRANSPORT
  e.built = true;
  e.probe = &probe;
  e.connect = &connect_spec;
#else
  e.not_built = "not compiled in: no CUDA toolkit (nvcc) at configure time, or -DHOOP_CUDA=OFF";
#endif
  e.device_memory = true;
  e.auto_order = 50;
  transports::register_transport(e);
  return true;
}();

}  // namespace
}  // namespace hoop::cuda
