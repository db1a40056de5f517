// The cuda entry of the transport registry (CUDA IPC between the processes of one host, for
// device buffers). Never a host transport: the device path (HOOP_GPU_BACKEND=hoop) connects it
// by name. Built in every build; usable where hoop::device has a device (a GPU, or the fake
// device of HOOP_FAKE_DEVICE).
#include <fmt/format.h>

#include "device/device.h"
#include "transports/cuda/cuda_transport.h"
#include "transports/registry.h"

namespace hoop::cuda {
namespace {

Result<std::unique_ptr<Transport>> connect_spec(const transports::ConnectSpec& s) {
  return connect_for_communicator(*s.info, *s.store, s.key_prefix, s.device);
}

// Usable where hoop::device has a device: a GPU, or the fake device in any build.
transports::Probe probe() {
  if (device::device_count() > 0) return {true, device::describe()};
  if (!device::cuda_built())
    return {false,
            "built without CUDA (no nvcc at configure time, or -DHOOP_CUDA=OFF): only the fake "
            "device of HOOP_FAKE_DEVICE runs it"};
  return {false, fmt::format("built, but no usable device: {}", device::unavailable_reason())};
}

const bool registered = [] {
  transports::TransportEntry e;
  e.name = "cuda";
  e.built = true;
  e.probe = &probe;
  e.connect = &connect_spec;
  e.device_memory = true;
  e.auto_order = 50;
  transports::register_transport(e);
  return true;
}();

}  // namespace
}  // namespace hoop::cuda
