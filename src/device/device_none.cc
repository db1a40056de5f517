// hoop::device in a build without CUDA: no devices, every pointer is host memory, and any
// request for device work is an error that says so, so that callers need no #ifdef.
#include "device/device.h"

namespace hoop::device {
namespace {

Status no_cuda() {
  return invalid_argument(
      "hoop was built without CUDA (no nvcc at configure time, or -DHOOP_CUDA=OFF)");
}

}  // namespace

bool cuda_built() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() { return "hoop was built without CUDA"; }
std::string describe() { return ""; }
int pointer_device(const void*) { return kCpuDevice; }
Status set_device(int) { return no_cuda(); }

Result<Stream> Stream::create(int) { return no_cuda(); }
Stream::Stream(Stream&&) noexcept {}
Stream& Stream::operator=(Stream&&) noexcept { return *this; }
Stream::~Stream() = default;

Result<Event> Event::create(int, bool) { return no_cuda(); }
Event::Event(Event&&) noexcept {}
Event& Event::operator=(Event&&) noexcept { return *this; }
Event::~Event() = default;
Status Event::record(void*) { return no_cuda(); }
Result<bool> Event::query() const { return no_cuda(); }
Status Event::make_wait(void*) const { return no_cuda(); }

Result<Buffer> Buffer::allocate(int, std::size_t bytes) {
  if (bytes == 0) return Buffer();
  return no_cuda();
}
Buffer::Buffer(Buffer&&) noexcept {}
Buffer& Buffer::operator=(Buffer&&) noexcept { return *this; }
Buffer::~Buffer() = default;
Status Buffer::reserve(int, std::size_t bytes) { return bytes == 0 ? Status() : no_cuda(); }

Status copy(void*, const void*, std::size_t bytes, void*) {
  return bytes == 0 ? Status() : no_cuda();
}
Status zero(void*, std::size_t bytes, void*) { return bytes == 0 ? Status() : no_cuda(); }
Status synchronize(void*, Deadline) { return Status(); }
Status reduce_into(void*, const void*, std::size_t, DataType, ReduceOp, void*) { return no_cuda(); }
Status reduce(void*, const void*, const void*, std::size_t, DataType, ReduceOp, void*) {
  return no_cuda();
}
Status divide(void*, std::size_t, DataType, std::int64_t, void*) { return no_cuda(); }
Status scale(void*, std::size_t, DataType, double, void*) { return no_cuda(); }

}  // namespace hoop::device
