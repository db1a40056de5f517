// hoop::device's entry points: the Api chosen for this process (device_api.h), the argument
// checks every Api shares, and the owned streams, events and buffers. Destructors cannot return
// an error, so a failed release is logged (it means the CUDA context is already broken).
#include "device/device.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <thread>
#include <utility>

#include "core/config.h"
#include "core/log.h"
#include "core/reduce_checks.h"
#include "device/device_api.h"

namespace hoop::device {
namespace {

using detail::Api;

/// No device at all: every call that needs one fails, saying why.
class NoDevice final : public Api {
 public:
  explicit NoDevice(std::string reason) : reason_(std::move(reason)) {}
  bool fake() const override { return false; }
  int count() const override { return 0; }
  std::string unavailable_reason() const override { return reason_; }
  std::string describe() const override { return ""; }
  bool mps_active() const override { return false; }
  int pointer_device(const void*) const override { return kCpuDevice; }
  bool kernel_reachable(const void*) const override { return false; }
  // device.cc checks for a device before calling any of the rest.
  Status set_device(int) override { return none(); }
  Result<int> current_device() override { return none(); }
  Result<void*> create_stream(int) override { return none(); }
  Status destroy_stream(void*) override { return none(); }
  int stream_device(void*) override { return kCpuDevice; }
  Result<bool> stream_done(void*) override { return true; }
  Result<void*> create_event(int, bool) override { return none(); }
  Status destroy_event(void*) override { return none(); }
  Status record(void*, void*) override { return none(); }
  Result<bool> query(void*) override { return none(); }
  Status make_wait(void*, void*) override { return none(); }
  Result<void*> allocate(int, std::size_t) override { return none(); }
  Status release(void*) override { return none(); }
  Result<void*> allocate_pinned(std::size_t) override { return none(); }
  Status release_pinned(void*) override { return none(); }
  Status copy(void*, const void*, std::size_t, void*) override { return none(); }
  Status zero(void*, std::size_t, void*) override { return none(); }
  Status combine(void*, const void*, const void*, std::size_t, DataType, ReduceOp, void*) override {
    return none();
  }
  Status divide(void*, std::size_t, DataType, std::int64_t, void*) override { return none(); }
  Status scale(void*, std::size_t, DataType, double, void*) override { return none(); }
  Result<IpcHandle> export_memory(void*) override { return none(); }
  Result<void*> open_memory(const IpcHandle&) override { return none(); }
  Status close_memory(void*) override { return none(); }

 private:
  Status none() const { return invalid_argument(reason_); }
  std::string reason_;
};

Api* choose() {
  Result<std::int64_t> fake = config::get_int("HOOP_FAKE_DEVICE");
  if (!fake.ok()) return new NoDevice(fake.status().message());
  if (*fake > 0) return &detail::fake_api(static_cast<int>(*fake));
#ifdef HOOP_HAVE_CUDA
  return &detail::cuda_api();
#else
  return new NoDevice("hoop was built without CUDA");
#endif
}

// Chosen once: CUDA fixes the visible devices when it initializes, and a process must not mix
// fake pointers with real ones.
Api& api() {
  static Api* chosen = choose();  // never destroyed: buffers may be released at exit
  return *chosen;
}

void log_release(const Status& s) {
  if (!s.ok()) HOOP_LOG(kWarn, "{}", s.to_string());
}

Status check_device(std::string_view fn, int device) {
  const int count = api().count();
  if (count == 0)
    return invalid_argument(
        fmt::format("{}: no usable CUDA device: {}", fn, api().unavailable_reason()));
  if (device < 0 || device >= count)
    return invalid_argument(
        fmt::format("{}: CUDA device {} does not exist (this process sees {})", fn, device, count));
  return Status::success();
}

Result<int> current_device(std::string_view fn) {
  HOOP_RETURN_IF_ERROR(check_device(fn, 0));
  return api().current_device();
}

/// Makes a device current for the scope's lifetime and then restores the caller's, so that
/// creating a stream or buffer on another device leaves the thread's current device alone.
class DeviceScope {
 public:
  DeviceScope() = default;
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  ~DeviceScope() {
    if (previous_ != kCpuDevice) (void)api().set_device(previous_);
  }
  Status enter(int device) {
    HOOP_ASSIGN_OR_RETURN(int current, api().current_device());
    if (current == device) return Status::success();
    HOOP_RETURN_IF_ERROR(api().set_device(device));
    if (previous_ == kCpuDevice) previous_ = current;
    return Status::success();
  }

 private:
  int previous_ = kCpuDevice;
};

struct Operand {
  std::string_view name;
  const void* pointer;
};

// Queues `launch` once every operand is reachable: a kernel handed a pageable host pointer
// would fault and take the whole CUDA context down with it.
template <class Launch>
Status run_kernel(std::string_view fn, std::initializer_list<Operand> operands, Launch launch) {
  HOOP_ASSIGN_OR_RETURN(int device, current_device(fn));
  for (const Operand& operand : operands) {
    if (!api().kernel_reachable(operand.pointer)) {
      return invalid_argument(
          fmt::format("{}: {} is pageable host memory, which a kernel on CUDA device {} cannot "
                      "reach (copy it to the device, or pin it with cudaHostRegister)",
                      fn, operand.name, device));
    }
  }
  return launch().with_context(fn);
}

/// Polls `done` until it holds or fails, or `deadline` passes (timeout_error saying `late()`).
/// Yields first (short waits end within microseconds), then sleeps, doubling up to 1 ms, so that
/// a long wait does not hold a core.
template <class Done, class Late>
Status poll_until(Done done, Deadline deadline, Late late) {
  constexpr int kYields = 64;
  constexpr auto kMaxSleep = std::chrono::microseconds(1000);
  auto sleep = std::chrono::microseconds(10);
  for (int polls = 0;; ++polls) {
    HOOP_ASSIGN_OR_RETURN(bool finished, done());
    if (finished) return Status::success();
    if (Clock::now() >= deadline) return timeout_error(late());
    if (polls < kYields) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, kMaxSleep);
    }
  }
}

Status check_event(std::string_view fn, const void* handle) {
  if (handle != nullptr) return Status::success();
  return invalid_argument(fmt::format(
      "{}: the event is empty (default-constructed or moved from); make one with Event::create",
      fn));
}

}  // namespace

bool cuda_built() {
#ifdef HOOP_HAVE_CUDA
  return true;
#else
  return false;
#endif
}
bool fake() { return api().fake(); }
int device_count() {
  // Fixed for the process (the API and its device list are chosen once); every collective asks.
  static const int count = api().count();
  return count;
}
std::string unavailable_reason() { return api().unavailable_reason(); }
std::string describe() { return api().describe(); }
bool mps_active() { return api().mps_active(); }
int pointer_device(const void* p) { return p == nullptr ? kCpuDevice : api().pointer_device(p); }

Status set_device(int device) {
  HOOP_RETURN_IF_ERROR(check_device("set_device", device));
  return api().set_device(device);
}

// ---- owned objects ---------------------------------------------------------------------------

Result<Stream> Stream::create(int device) {
  HOOP_RETURN_IF_ERROR(check_device("Stream::create", device));
  DeviceScope scope;
  HOOP_RETURN_IF_ERROR(scope.enter(device));
  HOOP_ASSIGN_OR_RETURN(void* handle, api().create_stream(device));
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
  if (handle_ != nullptr) log_release(api().destroy_stream(handle_));
}

Result<Event> Event::create(int device, bool interprocess) {
  HOOP_RETURN_IF_ERROR(check_device("Event::create", device));
  DeviceScope scope;
  HOOP_RETURN_IF_ERROR(scope.enter(device));
  HOOP_ASSIGN_OR_RETURN(void* handle, api().create_event(device, interprocess));
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
  if (handle_ != nullptr) log_release(api().destroy_event(handle_));
}

Status Event::record(void* stream) {
  HOOP_RETURN_IF_ERROR(check_event("Event::record", handle_));
  return api().record(handle_, stream);
}

Result<bool> Event::query() const {
  HOOP_RETURN_IF_ERROR(check_event("Event::query", handle_));
  return api().query(handle_);
}

Status Event::make_wait(void* stream) const {
  HOOP_RETURN_IF_ERROR(check_event("Event::make_wait", handle_));
  return api().make_wait(handle_, stream);
}

Status Event::wait(Deadline deadline) const {
  HOOP_RETURN_IF_ERROR(check_event("Event::wait", handle_));
  return poll_until([&] { return api().query(handle_); }, deadline,
                    [&] {
                      return fmt::format(
                          "Event::wait: work recorded on CUDA device {} had not finished at the "
                          "deadline",
                          device_);
                    });
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
  if (data_ != nullptr) log_release(api().release(data_));
}

Status Buffer::reserve(int device, std::size_t bytes) {
  if (bytes == 0 || (device == device_ && bytes <= size_)) return Status::success();
  const std::string fn = fmt::format("Buffer::reserve({} bytes)", bytes);
  HOOP_RETURN_IF_ERROR(check_device(fn, device));
  // Free first: the contents go anyway, and the old block may be needed to fit the new one.
  *this = Buffer();
  DeviceScope scope;
  HOOP_RETURN_IF_ERROR(scope.enter(device));
  HOOP_ASSIGN_OR_RETURN(data_, api().allocate(device, bytes));
  size_ = bytes;
  device_ = device;
  return Status::success();
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    PinnedBuffer old(std::move(*this));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) log_release(api().release_pinned(data_));
}

Status PinnedBuffer::reserve(std::size_t bytes) {
  if (bytes <= size_) return Status::success();
  HOOP_RETURN_IF_ERROR(check_device(fmt::format("PinnedBuffer::reserve({} bytes)", bytes), 0));
  *this = PinnedBuffer();
  HOOP_ASSIGN_OR_RETURN(data_, api().allocate_pinned(bytes));
  size_ = bytes;
  return Status::success();
}

Result<IpcHandle> export_memory(void* base) {
  HOOP_RETURN_IF_ERROR(check_device("export_memory", 0));
  if (base == nullptr) return invalid_argument("export_memory: the allocation is null");
  return api().export_memory(base);
}

Result<IpcMapping> IpcMapping::open(const IpcHandle& handle) {
  HOOP_RETURN_IF_ERROR(check_device("IpcMapping::open", 0));
  IpcMapping mapping;
  HOOP_ASSIGN_OR_RETURN(mapping.base_, api().open_memory(handle));
  return mapping;
}

IpcMapping::IpcMapping(IpcMapping&& other) noexcept : base_(std::exchange(other.base_, nullptr)) {}

IpcMapping& IpcMapping::operator=(IpcMapping&& other) noexcept {
  if (this != &other) {
    IpcMapping old(std::move(*this));
    base_ = std::exchange(other.base_, nullptr);
  }
  return *this;
}

IpcMapping::~IpcMapping() {
  if (base_ != nullptr) log_release(api().close_memory(base_));
}

// ---- copies, waits and kernels ---------------------------------------------------------------

Status copy(void* dst, const void* src, std::size_t bytes, void* stream) {
  if (bytes == 0) return Status::success();
  if (dst == nullptr || src == nullptr) {
    return invalid_argument(fmt::format("device::copy: {} is null with {} bytes",
                                        dst == nullptr ? "dst" : "src", bytes));
  }
  HOOP_RETURN_IF_ERROR(check_device("device::copy", 0));
  return api().copy(dst, src, bytes, stream);
}

Status zero(void* dst, std::size_t bytes, void* stream) {
  if (bytes == 0) return Status::success();
  if (dst == nullptr)
    return invalid_argument(fmt::format("device::zero: dst is null with {} bytes", bytes));
  HOOP_RETURN_IF_ERROR(check_device("device::zero", 0));
  return api().zero(dst, bytes, stream);
}

Status synchronize(void* stream, Deadline deadline) {
  if (api().count() == 0) return Status::success();  // nothing can have been queued
  return poll_until([&] { return api().stream_done(stream); }, deadline,
                    [&] {
                      return fmt::format(
                          "device::synchronize: work queued on a stream of CUDA device {} had not "
                          "finished at the "
                          "deadline",
                          api().stream_device(stream));
                    });
}

Status reduce_into(void* dst, const void* src, std::size_t count, DataType dtype, ReduceOp op,
                   void* stream) {
  constexpr std::string_view kFn = "device::reduce_into";
  HOOP_RETURN_IF_ERROR(reduce_detail::check_reduce_into(kFn, dst, src, count, dtype, op));
  if (count == 0) return Status::success();
  return run_kernel(kFn, {{"dst", dst}, {"src", src}},
                    [&] { return api().combine(dst, dst, src, count, dtype, op, stream); });
}

Status reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
              ReduceOp op, void* stream) {
  constexpr std::string_view kFn = "device::reduce";
  HOOP_RETURN_IF_ERROR(reduce_detail::check_reduce(kFn, dst, a, b, count, dtype, op));
  if (count == 0) return Status::success();
  return run_kernel(kFn, {{"dst", dst}, {"a", a}, {"b", b}},
                    [&] { return api().combine(dst, a, b, count, dtype, op, stream); });
}

Status divide(void* buf, std::size_t count, DataType dtype, std::int64_t divisor, void* stream) {
  constexpr std::string_view kFn = "device::divide";
  HOOP_RETURN_IF_ERROR(reduce_detail::check_divide(kFn, buf, count, dtype, divisor));
  if (count == 0) return Status::success();
  return run_kernel(kFn, {{"buf", buf}},
                    [&] { return api().divide(buf, count, dtype, divisor, stream); });
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
                    [&] { return api().scale(buf, count, dtype, factor, stream); });
}

}  // namespace hoop::device
