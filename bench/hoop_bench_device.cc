#include "bench/hoop_bench_device.h"

#include <fmt/format.h>

#include <utility>

#include "device/device.h"
#include "hoop/rendezvous.h"

namespace hoop::bench {
namespace {

class DeviceBuffer final : public BenchBuffer {
 public:
  DeviceBuffer(Buffer host, device::Buffer target)
      : BenchBuffer(std::move(host)), target_(std::move(target)) {}

  std::byte* target() const override { return target_.data(); }
  Status push(std::size_t bytes) override { return device::copy(target(), host(), bytes); }
  Status pull(std::size_t bytes) override { return device::copy(host(), target(), bytes); }

 private:
  device::Buffer target_;
};

}  // namespace

Result<int> choose_device() {
  const int count = device::device_count();
  if (count == 0)
    return invalid_argument(
        fmt::format("-g/--device: no usable CUDA device: {}", device::unavailable_reason()));
  HOOP_ASSIGN_OR_RETURN(const BootstrapInfo info, bootstrap_from_env());
  const int chosen = info.local_rank % count;
  HOOP_RETURN_IF_ERROR(device::set_device(chosen));
  return chosen;
}

Result<std::unique_ptr<BenchBuffer>> device_buffer(int device, std::size_t bytes) {
  Buffer host = allocate(bytes);
  if (!host) return internal_error(fmt::format("cannot allocate {} bytes of host memory", bytes));
  HOOP_ASSIGN_OR_RETURN(device::Buffer target, device::Buffer::allocate(device, bytes));
  return std::unique_ptr<BenchBuffer>(new DeviceBuffer(std::move(host), std::move(target)));
}

}  // namespace hoop::bench
