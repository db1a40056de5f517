// The fake device (HOOP_FAKE_DEVICE=N): host memory standing in for N CUDA devices, so that
// the device path's protocols (routes, transports/cuda, staging) run in CI where no GPU is.
//
// What it keeps of CUDA's behaviour, because the protocols depend on it:
//   - device memory is memory pointer_device() knows: a memfd mapping per allocation, which
//     another process of this host opens through export_memory/open_memory as through CUDA IPC
//     (the handle names the exporter's pid and descriptor; /proc/<pid>/fd opens it);
//   - pageable host memory is out of a kernel's reach, pinned memory within it;
//   - streams are asynchronous: a copy or kernel queued on a stream runs only when something
//     waits for it, and the first query of an event whose work is pending answers "not yet"
//     (and runs nothing), so a protocol that reads bytes before their event completed reads
//     stale memory and fails its test, as it would on a GPU now and then;
//   - the kernels are the host's own (core/reduce.h, core/scale.h), so the bits a fake device
//     computes are the host's by construction: only the real device's kernels need a GPU to
//     test.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/reduce.h"
#include "core/scale.h"
#include "device/device_api.h"

namespace hoop::device::detail {
namespace {

constexpr std::uint64_t kMagic = 0x686f6f7066616b65ull;  // "hoopfake"

/// What an IpcHandle of the fake device holds.
struct FakeHandle {
  std::uint64_t magic;
  std::int64_t pid;
  std::int64_t fd;
  std::uint64_t bytes;
  std::int64_t device;
};
static_assert(sizeof(FakeHandle) <= sizeof(IpcHandle::bytes));

struct Region {
  std::size_t bytes = 0;
  int device = kCpuDevice;  // kCpuDevice: pinned host memory
  int fd = -1;              // this process's allocation (exportable); -1: opened or pinned
};

struct FakeStream {
  int device = 0;
  std::deque<std::function<void()>> pending;
  std::uint64_t queued = 0;  // operations ever queued
  std::uint64_t ran = 0;     // of which have run
};

struct FakeEvent {
  FakeStream* stream = nullptr;  // null: recorded on a default stream (complete at once)
  std::uint64_t ticket = 0;      // done once stream->ran reaches it
  bool asked = false;            // the pending work was reported once as running
};

// Process-wide where CUDA's is per thread: a thread_local would make libhoop need the dynamic
// loader by name (__tls_get_addr), and hoop's threads all use one device of a communicator.
std::atomic<int> current{0};

class FakeApi final : public Api {
 public:
  explicit FakeApi(int count) : count_(count) {}

  bool fake() const override { return true; }
  int count() const override { return count_; }
  std::string unavailable_reason() const override { return ""; }
  std::string describe() const override {
    return fmt::format(
        "fake device (HOOP_FAKE_DEVICE={}): host memory standing in for {} CUDA "
        "device{}",
        count_, count_, count_ == 1 ? "" : "s");
  }
  bool mps_active() const override { return false; }

  int pointer_device(const void* p) const override {
    std::lock_guard<std::mutex> lock(mu_);
    const Region* r = find(p);
    return r == nullptr ? kCpuDevice : r->device;
  }
  bool kernel_reachable(const void* p) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return find(p) != nullptr;
  }
  Status set_device(int device) override {
    current = device;
    return Status::success();
  }
  Result<int> current_device() override { return current.load(); }

  Result<void*> create_stream(int device) override {
    auto* s = new FakeStream();
    s->device = device;
    return static_cast<void*>(s);
  }
  Status destroy_stream(void* stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto* s = static_cast<FakeStream*>(stream);
    run_until(*s, s->queued);  // as CUDA, queued work still completes
    delete s;
    return Status::success();
  }
  int stream_device(void* stream) override {
    return stream == nullptr ? current.load() : static_cast<FakeStream*>(stream)->device;
  }
  Result<bool> stream_done(void* stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (stream != nullptr) run_until(*static_cast<FakeStream*>(stream), UINT64_MAX);
    return true;
  }

  Result<void*> create_event(int, bool) override { return static_cast<void*>(new FakeEvent()); }
  Status destroy_event(void* event) override {
    delete static_cast<FakeEvent*>(event);
    return Status::success();
  }
  Status record(void* event, void* stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto* e = static_cast<FakeEvent*>(event);
    e->stream = static_cast<FakeStream*>(stream);
    e->ticket = e->stream == nullptr ? 0 : e->stream->queued;
    e->asked = false;
    return Status::success();
  }
  Result<bool> query(void* event) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto* e = static_cast<FakeEvent*>(event);
    if (e->stream == nullptr || e->stream->ran >= e->ticket) return true;
    if (!e->asked) {
      e->asked = true;
      return false;
    }
    run_until(*e->stream, e->ticket);
    return true;
  }
  Status make_wait(void* event, void* stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto* e = static_cast<FakeEvent*>(event);
    FakeStream* waited = e->stream;
    const std::uint64_t ticket = e->ticket;
    if (waited == nullptr) return Status::success();
    enqueue(stream, [this, waited, ticket] { run_until(*waited, ticket); });
    return Status::success();
  }

  Result<void*> allocate(int device, std::size_t bytes) override {
    const int fd = ::memfd_create("hoop-fake-device", MFD_CLOEXEC);
    if (fd < 0) return io_error(fmt::format("fake device: memfd_create: {}", std::strerror(errno)));
    void* p = MAP_FAILED;
    if (::ftruncate(fd, static_cast<off_t>(bytes)) == 0)
      p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      return io_error(fmt::format("fake device: allocating {} bytes on device {}: {}", bytes,
                                  device, std::strerror(error)));
    }
    std::lock_guard<std::mutex> lock(mu_);
    regions_[reinterpret_cast<std::uintptr_t>(p)] = Region{bytes, device, fd};
    return p;
  }
  Status release(void* data) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.find(reinterpret_cast<std::uintptr_t>(data));
    if (it == regions_.end() || it->second.device == kCpuDevice)
      return invalid_argument("fake device: release of memory it did not allocate");
    ::munmap(data, it->second.bytes);
    if (it->second.fd >= 0) ::close(it->second.fd);
    regions_.erase(it);
    return Status::success();
  }
  Result<void*> allocate_pinned(std::size_t bytes) override {
    void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (p == nullptr) return io_error(fmt::format("fake device: pinning {} bytes failed", bytes));
    std::lock_guard<std::mutex> lock(mu_);
    regions_[reinterpret_cast<std::uintptr_t>(p)] = Region{bytes, kCpuDevice, -1};
    return p;
  }
  Status release_pinned(void* data) override {
    std::lock_guard<std::mutex> lock(mu_);
    regions_.erase(reinterpret_cast<std::uintptr_t>(data));
    std::free(data);
    return Status::success();
  }

  Status copy(void* dst, const void* src, std::size_t bytes, void* stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    enqueue(stream, [=] { std::memmove(dst, src, bytes); });
    return Status::success();
  }
  Status zero(void* dst, std::size_t bytes, void* stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    enqueue(stream, [=] { std::memset(dst, 0, bytes); });
    return Status::success();
  }
  // device.cc checked the arguments as the host kernels check them, so these cannot fail.
  Status combine(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                 ReduceOp op, void* stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    enqueue(stream, [=] { (void)hoop::reduce(dst, a, b, count, dtype, op); });
    return Status::success();
  }
  Status divide(void* buf, std::size_t count, DataType dtype, std::int64_t divisor,
                void* stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    enqueue(stream, [=] { (void)hoop::divide(buf, count, dtype, divisor); });
    return Status::success();
  }
  Status scale(void* buf, std::size_t count, DataType dtype, double factor, void* stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    enqueue(stream, [=] {
      // The device kernels take any alignment, the host's scale typed loads: scale a copy.
      const std::size_t bytes = count * dtype_size(dtype);
      std::vector<std::max_align_t> aligned(bytes / sizeof(std::max_align_t) + 1);
      std::memcpy(aligned.data(), buf, bytes);
      (void)hoop::scale_copy(aligned.data(), aligned.data(), count, dtype, factor);
      std::memcpy(buf, aligned.data(), bytes);
    });
    return Status::success();
  }

  Result<IpcHandle> export_memory(void* base) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.find(reinterpret_cast<std::uintptr_t>(base));
    if (it == regions_.end() || it->second.fd < 0)
      return invalid_argument(
          "fake device: export_memory takes the start of an allocation of this process");
    const FakeHandle h{kMagic, ::getpid(), it->second.fd, it->second.bytes, it->second.device};
    IpcHandle out;
    std::memcpy(out.bytes.data(), &h, sizeof h);
    return out;
  }
  Result<void*> open_memory(const IpcHandle& handle) override {
    FakeHandle h{};
    std::memcpy(&h, handle.bytes.data(), sizeof h);
    if (h.magic != kMagic)
      return protocol_error("fake device: the memory handle is not one of the fake device's");
    const std::string path = fmt::format("/proc/{}/fd/{}", h.pid, h.fd);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0)
      return io_error(fmt::format("fake device: opening pid {}'s memory ({}): {}", h.pid, path,
                                  std::strerror(errno)));
    void* p = ::mmap(nullptr, h.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);  // the mapping keeps the memory
    if (p == MAP_FAILED)
      return io_error(
          fmt::format("fake device: mapping pid {}'s memory: {}", h.pid, std::strerror(errno)));
    std::lock_guard<std::mutex> lock(mu_);
    regions_[reinterpret_cast<std::uintptr_t>(p)] = Region{h.bytes, static_cast<int>(h.device), -1};
    return p;
  }
  Status close_memory(void* base) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.find(reinterpret_cast<std::uintptr_t>(base));
    if (it == regions_.end()) return invalid_argument("fake device: closing memory never opened");
    ::munmap(base, it->second.bytes);
    regions_.erase(it);
    return Status::success();
  }

 private:
  const Region* find(const void* p) const {
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    auto it = regions_.upper_bound(at);
    if (it == regions_.begin()) return nullptr;
    --it;
    return at < it->first + it->second.bytes ? &it->second : nullptr;
  }

  /// Queues `op` on `stream`, or runs it now on a default stream (null).
  void enqueue(void* stream, std::function<void()> op) {
    if (stream == nullptr) return op();
    auto* s = static_cast<FakeStream*>(stream);
    s->pending.push_back(std::move(op));
    ++s->queued;
  }

  /// Runs what `s` has queued until `ticket` operations have run.
  void run_until(FakeStream& s, std::uint64_t ticket) {
    while (s.ran < ticket && !s.pending.empty()) {
      std::function<void()> op = std::move(s.pending.front());
      s.pending.pop_front();
      ++s.ran;
      op();  // a make_wait's op runs another stream under the same lock
    }
  }

  const int count_;
  mutable std::mutex mu_;
  std::map<std::uintptr_t, Region> regions_;
};

}  // namespace

Api& fake_api(int count) {
  static FakeApi* api = new FakeApi(count);  // never destroyed, as device.cc's choice
  return *api;
}

}  // namespace hoop::device::detail
