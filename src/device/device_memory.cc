// hoop::device's owned CUDA objects: streams, events and device buffers. Destructors cannot
// return an error, so a failed release is logged (it means the CUDA context is already broken).
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <utility>

#include "core/log.h"
#include "device/cuda_util.h"
#include "device/device.h"

namespace hoop::device {
namespace {

using detail::cuda_status;

void log_release(cudaError_t error, std::string_view call, int device) {
  if (error == cudaSuccess) return;
  (void)cudaGetLastError();
  HOOP_LOG(kWarn, "{}", cuda_status(error, call, device).to_string());
}

// Runs `create` (a CUDA call that makes a stream or event) with `device` current.
template <class Create>
Status create_on(std::string_view fn, int device, std::string_view call, Create create) {
  HOOP_RETURN_IF_ERROR(detail::check_device(fn, device));
  detail::DeviceScope scope;
  HOOP_RETURN_IF_ERROR(scope.enter(device));
  return cuda_status(create(), call, device);
}

}  // namespace

Result<Stream> Stream::create(int device) {
  cudaStream_t handle = nullptr;
  HOOP_RETURN_IF_ERROR(create_on("Stream::create", device, "cudaStreamCreateWithFlags", [&] {
    return cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking);
  }));
  Stream stream;
  stream.handle_ = handle;
  stream.device_ = device;
  return stream;
}

Stream::Stream(Stream&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      device_(std::exchange(other.device_, kCpuDevice)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    Stream old(std::move(*this));
    handle_ = std::exchange(other.handle_, nullptr);
    device_ = std::exchange(other.device_, kCpuDevice);
  }
  return *this;
}

Stream::~Stream() {
  if (handle_ == nullptr) return;
  log_release(cudaStreamDestroy(static_cast<cudaStream_t>(handle_)), "cudaStreamDestroy", device_);
}

Result<Event> Event::create(int device, bool interprocess) {
  // Interprocess events must not time (CUDA's rule); no caller times through this class.
  const unsigned flags = cudaEventDisableTiming | (interprocess ? cudaEventInterprocess : 0u);
  cudaEvent_t handle = nullptr;
  HOOP_RETURN_IF_ERROR(create_on("Event::create", device, "cudaEventCreateWithFlags",
                                 [&] { return cudaEventCreateWithFlags(&handle, flags); }));
  Event event;
  event.handle_ = handle;
  event.device_ = device;
  return event;
}

Event::Event(Event&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      device_(std::exchange(other.device_, kCpuDevice)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    Event old(std::move(*this));
    handle_ = std::exchange(other.handle_, nullptr);
    device_ = std::exchange(other.device_, kCpuDevice);
  }
  return *this;
}

Event::~Event() {
  if (handle_ == nullptr) return;
  log_release(cudaEventDestroy(static_cast<cudaEvent_t>(handle_)), "cudaEventDestroy", device_);
}

namespace {

Status check_event(std::string_view fn, const void* handle) {
  if (handle != nullptr) return Status::success();
  return invalid_argument(
      fmt::format("{}: the event is empty (default-constructed or moved "
                  "from); make one with Event::create",
                  fn));
}

}  // namespace

Status Event::record(void* stream) {
  HOOP_RETURN_IF_ERROR(check_event("Event::record", handle_));
  return cuda_status(cudaEventRecord(static_cast<cudaEvent_t>(handle_), detail::as_stream(stream)),
                     "cudaEventRecord", device_);
}

Result<bool> Event::query() const {
  HOOP_RETURN_IF_ERROR(check_event("Event::query", handle_));
  const cudaError_t state = cudaEventQuery(static_cast<cudaEvent_t>(handle_));
  if (state == cudaSuccess) return true;
  if (state == cudaErrorNotReady) return false;
  return cuda_status(state, "cudaEventQuery", device_);
}

Status Event::make_wait(void* stream) const {
  HOOP_RETURN_IF_ERROR(check_event("Event::make_wait", handle_));
  return cuda_status(
      cudaStreamWaitEvent(detail::as_stream(stream), static_cast<cudaEvent_t>(handle_), 0),
      "cudaStreamWaitEvent", device_);
}

Result<Buffer> Buffer::allocate(int device, std::size_t bytes) {
  Buffer buffer;
  HOOP_RETURN_IF_ERROR(buffer.reserve(device, bytes));
  return buffer;
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      device_(std::exchange(other.device_, kCpuDevice)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Buffer old(std::move(*this));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    device_ = std::exchange(other.device_, kCpuDevice);
  }
  return *this;
}

Buffer::~Buffer() {
  if (data_ == nullptr) return;
  log_release(cudaFree(data_), "cudaFree", device_);
}

Status Buffer::reserve(int device, std::size_t bytes) {
  if (bytes == 0 || (device == device_ && bytes <= size_)) return Status::success();
  const std::string fn = fmt::format("Buffer::reserve({} bytes)", bytes);
  HOOP_RETURN_IF_ERROR(detail::check_device(fn, device));
  // Free first: the contents go anyway, and the old block may be needed to fit the new one.
  *this = Buffer();
  detail::DeviceScope scope;
  HOOP_RETURN_IF_ERROR(scope.enter(device));
  void* data = nullptr;
  HOOP_RETURN_IF_ERROR(cuda_status(cudaMalloc(&data, bytes), fn + ": cudaMalloc", device));
  data_ = data;
  size_ = bytes;
  device_ = device;
  return Status::success();
}

}  // namespace hoop::device
