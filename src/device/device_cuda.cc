// hoop::device over the CUDA runtime: device discovery, pointers, copies, waits, and the checked
// entry points of the reduction kernels (reduce_kernels.cu). Streams, events and buffers are in
// device_memory.cc.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <thread>
#include <utility>

#include "core/reduce_checks.h"
#include "device/cuda_util.h"
#include "device/device.h"
#include "device/kernels.h"

namespace hoop::device {
namespace {

using detail::as_stream;
using detail::cuda_status;

struct Devices {
  int count = 0;
  std::string reason;  // why count is 0
};

// Asked once: CUDA fixes the visible devices (CUDA_VISIBLE_DEVICES) when it initializes.
const Devices& devices() {
  static const Devices found = [] {
    Devices d;
    const cudaError_t error = cudaGetDeviceCount(&d.count);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();  // not this process's fault; later calls must not see it
      d.count = 0;
      d.reason = fmt::format("cudaGetDeviceCount failed: {} ({})", cudaGetErrorString(error),
                             cudaGetErrorName(error));
    } else if (d.count == 0) {
      d.reason =
          "the CUDA runtime sees no device (cudaGetDeviceCount returned 0; check "
          "CUDA_VISIBLE_DEVICES)";
    }
    return d;
  }();
  return found;
}

// The thread's current device, or why there is none.
Status current_device(std::string_view fn, int* device) {
  HOOP_RETURN_IF_ERROR(detail::check_device(fn, 0));
  return cuda_status(cudaGetDevice(device), "cudaGetDevice");
}

struct Operand {
  std::string_view name;
  const void* pointer;
};

// Whether a kernel may touch `p`: device memory (the current device's, or a peer's where peer
// access is on, as for CUDA IPC buffers), managed memory and pinned host memory can be reached;
// pageable host memory cannot.
bool kernel_reachable(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attributes.type != cudaMemoryTypeUnregistered;
}

// Queues `launch` once every operand is reachable: a kernel handed a pageable host pointer
// would fault and take the whole CUDA context down with it.
template <class Launch>
Status run_kernel(std::string_view fn, std::initializer_list<Operand> operands, Launch launch) {
  int device = kCpuDevice;
  HOOP_RETURN_IF_ERROR(current_device(fn, &device));
  for (const Operand& operand : operands) {
    if (!kernel_reachable(operand.pointer)) {
      return invalid_argument(
          fmt::format("{}: {} is pageable host memory, which a kernel on CUDA device {} cannot "
                      "reach (copy it to the device, or pin it with cudaHostRegister)",
                      fn, operand.name, device));
    }
  }
  const cudaError_t error = launch();
  if (error == cudaSuccess) return Status::success();
  return cuda_status(error, fmt::format("{} (kernel launch)", fn), device);
}

// The device `stream` belongs to, for error messages; the current one for the per-thread
// default stream.
int stream_device(cudaStream_t stream) {
  int device = kCpuDevice;
  if (cudaStreamGetDevice(stream, &device) == cudaSuccess) return device;
  (void)cudaGetLastError();
  if (cudaGetDevice(&device) == cudaSuccess) return device;
  (void)cudaGetLastError();
  return kCpuDevice;
}

}  // namespace

namespace detail {

Status cuda_status(cudaError_t error, std::string_view call, int device) {
  if (error == cudaSuccess) return Status::success();
  const std::string where = device == kCpuDevice ? "" : fmt::format(" on CUDA device {}", device);
  return io_error(fmt::format("{} failed{}: {} ({})", call, where, cudaGetErrorString(error),
                              cudaGetErrorName(error)));
}

Status check_device(std::string_view fn, int device) {
  const Devices& d = devices();
  if (d.count == 0) {
    return invalid_argument(fmt::format("{}: no usable CUDA device: {}", fn, d.reason));
  }
  if (device < 0 || device >= d.count) {
    return invalid_argument(fmt::format("{}: CUDA device {} does not exist (this process sees {})",
                                        fn, device, d.count));
  }
  return Status::success();
}

DeviceScope::~DeviceScope() {
  if (previous_ != kCpuDevice) (void)cudaSetDevice(previous_);
}

Status DeviceScope::enter(int device) {
  int current = kCpuDevice;
  HOOP_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&current), "cudaGetDevice"));
  if (current == device) return Status::success();
  HOOP_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device), "cudaSetDevice", device));
  if (previous_ == kCpuDevice) previous_ = current;
  return Status::success();
}

}  // namespace detail

bool cuda_built() { return true; }

int device_count() { return devices().count; }

std::string unavailable_reason() { return devices().reason; }

std::string describe() {
  const Devices& d = devices();
  int runtime = 0;
  if (d.count == 0 || cudaRuntimeGetVersion(&runtime) != cudaSuccess) return "";
  std::string out = fmt::format("CUDA {}.{}, {} device{}:", runtime / 1000, runtime % 1000 / 10,
                                d.count, d.count == 1 ? "" : "s");
  for (int i = 0; i < d.count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      (void)cudaGetLastError();
      out += fmt::format("{} (device {}: properties unavailable)", i == 0 ? " " : ", ", i);
      continue;
    }
    out += fmt::format("{}{}", i == 0 ? " " : ", ", prop.name);
  }
  return out;
}

int pointer_device(const void* p) {
  if (p == nullptr || devices().count == 0) return kCpuDevice;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();  // older runtimes flag plain host pointers as an error
    return kCpuDevice;
  }
  const bool on_device =
      attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  return on_device ? attributes.device : kCpuDevice;
}

Status set_device(int device) {
  HOOP_RETURN_IF_ERROR(detail::check_device("set_device", device));
  return cuda_status(cudaSetDevice(device), "cudaSetDevice", device);
}

Status copy(void* dst, const void* src, std::size_t bytes, void* stream) {
  if (bytes == 0) return Status::success();
  if (dst == nullptr || src == nullptr) {
    return invalid_argument(fmt::format("device::copy: {} is null with {} bytes",
                                        dst == nullptr ? "dst" : "src", bytes));
  }
  HOOP_RETURN_IF_ERROR(detail::check_device("device::copy", 0));
  const cudaStream_t s = as_stream(stream);
  cudaError_t error = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
  if (error == cudaSuccess && stream == nullptr) error = cudaStreamSynchronize(s);
  if (error == cudaSuccess) return Status::success();
  return cuda_status(error, fmt::format("device::copy of {} bytes", bytes), stream_device(s));
}

Status zero(void* dst, std::size_t bytes, void* stream) {
  if (bytes == 0) return Status::success();
  if (dst == nullptr)
    return invalid_argument(fmt::format("device::zero: dst is null with {} bytes", bytes));
  HOOP_RETURN_IF_ERROR(detail::check_device("device::zero", 0));
  const cudaStream_t s = as_stream(stream);
  cudaError_t error = cudaMemsetAsync(dst, 0, bytes, s);
  if (error == cudaSuccess && stream == nullptr) error = cudaStreamSynchronize(s);
  if (error == cudaSuccess) return Status::success();
  return cuda_status(error, fmt::format("device::zero of {} bytes", bytes), stream_device(s));
}

Status synchronize(void* stream, Deadline deadline) {
  if (devices().count == 0) return Status::success();  // nothing can have been queued
  const cudaStream_t s = as_stream(stream);
  // Yield first (short waits end within microseconds), then sleep, doubling up to 1 ms, so a
  // long wait does not hold a core.
  constexpr int kYields = 64;
  constexpr auto kMaxSleep = std::chrono::microseconds(1000);
  auto sleep = std::chrono::microseconds(10);
  for (int polls = 0;; ++polls) {
    const cudaError_t state = cudaStreamQuery(s);
    if (state == cudaSuccess) return Status::success();
    if (state != cudaErrorNotReady) return cuda_status(state, "cudaStreamQuery", stream_device(s));
    if (Clock::now() >= deadline) {
      return timeout_error(fmt::format(
          "device::synchronize: work queued on a stream of CUDA device {} had not finished at "
          "the deadline",
          stream_device(s)));
    }
    if (polls < kYields) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, kMaxSleep);
    }
  }
}

Status reduce_into(void* dst, const void* src, std::size_t count, DataType dtype, ReduceOp op,
                   void* stream) {
  constexpr std::string_view kFn = "device::reduce_into";
  HOOP_RETURN_IF_ERROR(reduce_detail::check_reduce_into(kFn, dst, src, count, dtype, op));
  if (count == 0) return Status::success();
  return run_kernel(kFn, {{"dst", dst}, {"src", src}}, [&] {
    return kernels::combine(dst, dst, src, count, dtype, reduce_detail::op_kind(op),
                            as_stream(stream));
  });
}

Status reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
              ReduceOp op, void* stream) {
  constexpr std::string_view kFn = "device::reduce";
  HOOP_RETURN_IF_ERROR(reduce_detail::check_reduce(kFn, dst, a, b, count, dtype, op));
  if (count == 0) return Status::success();
  return run_kernel(kFn, {{"dst", dst}, {"a", a}, {"b", b}}, [&] {
    return kernels::combine(dst, a, b, count, dtype, reduce_detail::op_kind(op), as_stream(stream));
  });
}

Status divide(void* buf, std::size_t count, DataType dtype, std::int64_t divisor, void* stream) {
  constexpr std::string_view kFn = "device::divide";
  HOOP_RETURN_IF_ERROR(reduce_detail::check_divide(kFn, buf, count, dtype, divisor));
  if (count == 0) return Status::success();
  return run_kernel(kFn, {{"buf", buf}},
                    [&] { return kernels::divide(buf, count, dtype, divisor, as_stream(stream)); });
}

Status scale(void* buf, std::size_t count, DataType dtype, double factor, void* stream) {
  constexpr std::string_view kFn = "device::scale";
  HOOP_RETURN_IF_ERROR(reduce_detail::check_dtype(kFn, dtype));
  if (!dtype_is_float(dtype)) {
    return invalid_argument(fmt::format("{}: factor {} on {} elements: only float types scale", kFn,
                                        factor, dtype_name(dtype)));
  }
  HOOP_RETURN_IF_ERROR(reduce_detail::check_buffer(kFn, "buf", buf, count, dtype));
  // As on the host, where a factor of 1 copies the bytes: no rounding, NaN payloads kept.
  if (count == 0 || factor == 1.0) return Status::success();
  return run_kernel(kFn, {{"buf", buf}},
                    [&] { return kernels::scale(buf, count, dtype, factor, as_stream(stream)); });
}

}  // namespace hoop::device
