// hoop::device over the CUDA runtime (device_api.h): discovery, memory, streams, events, copies,
// IPC, and the launches of the reduction kernels (reduce_kernels.cu). device.cc has checked the
// arguments and that a device is usable before any of these runs.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/reduce_checks.h"
#include "device/cuda_util.h"
#include "device/device_api.h"
#include "device/kernels.h"

namespace hoop::device {
namespace detail {

Status cuda_status(cudaError_t error, std::string_view call, int device) {
  if (error == cudaSuccess) return Status::success();
  (void)cudaGetLastError();  // a sticky error stays; a plain one must not fail the next call
  const std::string where = device == kCpuDevice ? "" : fmt::format(" on CUDA device {}", device);
  return io_error(fmt::format("{} failed{}: {} ({})", call, where, cudaGetErrorString(error),
                              cudaGetErrorName(error)));
}

namespace {

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

// The device `stream` belongs to, for error messages; the current one for the per-thread
// default stream.
int device_of(cudaStream_t stream) {
  int device = kCpuDevice;
  if (cudaStreamGetDevice(stream, &device) == cudaSuccess) return device;
  (void)cudaGetLastError();
  if (cudaGetDevice(&device) == cudaSuccess) return device;
  (void)cudaGetLastError();
  return kCpuDevice;
}

Status launched(cudaError_t error, cudaStream_t stream) {
  return cuda_status(error, "kernel launch", device_of(stream));
}

class CudaApi final : public Api {
 public:
  bool fake() const override { return false; }
  int count() const override { return devices().count; }
  std::string unavailable_reason() const override { return devices().reason; }

  std::string describe() const override {
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

  // The control daemon listens on a named pipe in its pipe directory (nvidia-cuda-mps-control
  // -d makes it); client processes find it there.
  bool mps_active() const override {
    const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
    const std::string pipe =
        std::string(dir != nullptr && dir[0] != '\0' ? dir : "/tmp/nvidia-mps") + "/control";
    struct stat st {};
    return ::stat(pipe.c_str(), &st) == 0;
  }

  int pointer_device(const void* p) const override {
    if (devices().count == 0) return kCpuDevice;
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
      (void)cudaGetLastError();  // older runtimes flag plain host pointers as an error
      return kCpuDevice;
    }
    const bool on_device =
        attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
    return on_device ? attributes.device : kCpuDevice;
  }

  bool kernel_reachable(const void* p) const override {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return attributes.type != cudaMemoryTypeUnregistered;
  }

  Status set_device(int device) override {
    return cuda_status(cudaSetDevice(device), "cudaSetDevice", device);
  }

  Result<int> current_device() override {
    int device = kCpuDevice;
    HOOP_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
    return device;
  }

  Result<void*> create_stream(int device) override {
    cudaStream_t s = nullptr;
    HOOP_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                                     "cudaStreamCreateWithFlags", device));
    return static_cast<void*>(s);
  }
  Status destroy_stream(void* stream) override {
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    const int device = device_of(s);
    return cuda_status(cudaStreamDestroy(s), "cudaStreamDestroy", device);
  }
  int stream_device(void* stream) override { return device_of(as_stream(stream)); }
  Result<bool> stream_done(void* stream) override {
    const cudaStream_t s = as_stream(stream);
    const cudaError_t state = cudaStreamQuery(s);
    if (state == cudaSuccess) return true;
    if (state == cudaErrorNotReady) return false;
    return cuda_status(state, "cudaStreamQuery", device_of(s));
  }

  Result<void*> create_event(int device, bool interprocess) override {
    // Interprocess events must not time (CUDA's rule); no caller times through this class.
    const unsigned flags = cudaEventDisableTiming | (interprocess ? cudaEventInterprocess : 0u);
    cudaEvent_t e = nullptr;
    HOOP_RETURN_IF_ERROR(
        cuda_status(cudaEventCreateWithFlags(&e, flags), "cudaEventCreateWithFlags", device));
    return static_cast<void*>(e);
  }
  Status destroy_event(void* event) override {
    return cuda_status(cudaEventDestroy(static_cast<cudaEvent_t>(event)), "cudaEventDestroy");
  }
  Status record(void* event, void* stream) override {
    const cudaStream_t s = as_stream(stream);
    return cuda_status(cudaEventRecord(static_cast<cudaEvent_t>(event), s), "cudaEventRecord",
                       device_of(s));
  }
  Result<bool> query(void* event) override {
    const cudaError_t state = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (state == cudaSuccess) return true;
    if (state == cudaErrorNotReady) return false;
    return cuda_status(state, "cudaEventQuery");
  }
  Status make_wait(void* event, void* stream) override {
    const cudaStream_t s = as_stream(stream);
    return cuda_status(cudaStreamWaitEvent(s, static_cast<cudaEvent_t>(event), 0),
                       "cudaStreamWaitEvent", device_of(s));
  }

  Result<void*> allocate(int device, std::size_t bytes) override {
    void* data = nullptr;
    HOOP_RETURN_IF_ERROR(cuda_status(cudaMalloc(&data, bytes),
                                     fmt::format("cudaMalloc of {} bytes", bytes), device));
    return data;
  }
  Status release(void* data) override { return cuda_status(cudaFree(data), "cudaFree"); }
  Result<void*> allocate_pinned(std::size_t bytes) override {
    void* data = nullptr;
    // Portable: pinned for every device's copies, not only the current one's.
    HOOP_RETURN_IF_ERROR(cuda_status(cudaHostAlloc(&data, bytes, cudaHostAllocPortable),
                                     fmt::format("cudaHostAlloc of {} bytes", bytes)));
    return data;
  }
  Status release_pinned(void* data) override {
    return cuda_status(cudaFreeHost(data), "cudaFreeHost");
  }

  Status copy(void* dst, const void* src, std::size_t bytes, void* stream) override {
    const cudaStream_t s = as_stream(stream);
    cudaError_t error = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
    if (error == cudaSuccess && stream == nullptr) error = cudaStreamSynchronize(s);
    return cuda_status(error, fmt::format("device::copy of {} bytes", bytes), device_of(s));
  }
  Status zero(void* dst, std::size_t bytes, void* stream) override {
    const cudaStream_t s = as_stream(stream);
    cudaError_t error = cudaMemsetAsync(dst, 0, bytes, s);
    if (error == cudaSuccess && stream == nullptr) error = cudaStreamSynchronize(s);
    return cuda_status(error, fmt::format("device::zero of {} bytes", bytes), device_of(s));
  }

  Status combine(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                 ReduceOp op, void* stream) override {
    const cudaStream_t s = as_stream(stream);
    return launched(kernels::combine(dst, a, b, count, dtype, reduce_detail::op_kind(op), s), s);
  }
  Status divide(void* buf, std::size_t count, DataType dtype, std::int64_t divisor,
                void* stream) override {
    const cudaStream_t s = as_stream(stream);
    return launched(kernels::divide(buf, count, dtype, divisor, s), s);
  }
  Status scale(void* buf, std::size_t count, DataType dtype, double factor, void* stream) override {
    const cudaStream_t s = as_stream(stream);
    return launched(kernels::scale(buf, count, dtype, factor, s), s);
  }

  Result<IpcHandle> export_memory(void* base) override {
    static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(IpcHandle::bytes));
    cudaIpcMemHandle_t h{};
    HOOP_RETURN_IF_ERROR(cuda_status(cudaIpcGetMemHandle(&h, base), "cudaIpcGetMemHandle"));
    IpcHandle out;
    std::memcpy(out.bytes.data(), &h, sizeof h);
    return out;
  }
  Result<void*> open_memory(const IpcHandle& handle) override {
    cudaIpcMemHandle_t h{};
    std::memcpy(&h, handle.bytes.data(), sizeof h);
    void* base = nullptr;
    HOOP_RETURN_IF_ERROR(
        cuda_status(cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess),
                    "cudaIpcOpenMemHandle (CUDA IPC needs the exporting process alive, on this "
                    "host, with peer access between the two devices)"));
    return base;
  }
  Status close_memory(void* base) override {
    return cuda_status(cudaIpcCloseMemHandle(base), "cudaIpcCloseMemHandle");
  }
};

}  // namespace

Api& cuda_api() {
  static CudaApi* api = new CudaApi();  // never destroyed, as device.cc's choice
  return *api;
}

}  // namespace detail
}  // namespace hoop::device
