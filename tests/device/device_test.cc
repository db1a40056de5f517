// hoop::device. DeviceTest runs in every build: what the build says about CUDA, the errors a
// process without a usable GPU gets, and the argument checks, which must match the CPU
// kernels'. DeviceGpuTest (ctest label gpu) runs the kernels on a GPU and compares them with
// the CPU kernels of src/core/reduce.h, and skips with unavailable_reason() where there is none.
#include "device/device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/reduce.h"
#include "core/scale.h"
#include "hoop/core.h"
#include "hoop/hoop.h"

#if HOOP_TEST_CUDA_BUILT
#include <cuda_runtime_api.h>
#endif

namespace hoop::device {
namespace {

using ::testing::HasSubstr;

constexpr int kBadEnum = 99;

TEST(DeviceTest, CudaBuiltMatchesTheConfigureStep) {
  EXPECT_EQ(cuda_built(), static_cast<bool>(HOOP_TEST_CUDA_BUILT));
  EXPECT_GE(device_count(), 0);
  // A usable device and a reason why there is none exclude each other.
  EXPECT_EQ(device_count() == 0, !unavailable_reason().empty()) << unavailable_reason();
  EXPECT_EQ(device_count() == 0, describe().empty()) << describe();
}

TEST(DeviceTest, ThePublicQueriesSayWhatHoopDeviceSays) {
  EXPECT_EQ(hoop::cuda_device_count(), device_count());
  EXPECT_EQ(hoop::cuda_unavailable_reason(), unavailable_reason());
}

TEST(DeviceTest, HostMemoryIsCpuMemory) {
  int on_stack = 0;
  const std::vector<double> on_heap(16);
  EXPECT_EQ(pointer_device(&on_stack), kCpuDevice);
  EXPECT_EQ(pointer_device(on_heap.data()), kCpuDevice);
  EXPECT_EQ(pointer_device(nullptr), kCpuDevice);
}

TEST(DeviceTest, EmptyBuffersNeedNoDevice) {
  Result<Buffer> empty = Buffer::allocate(0, 0);
  ASSERT_TRUE(empty.ok()) << empty.status().to_string();
  EXPECT_EQ(empty->data(), nullptr);
  EXPECT_EQ(empty->size(), 0u);
  EXPECT_TRUE(empty->reserve(0, 0).ok());
  EXPECT_TRUE(copy(nullptr, nullptr, 0).ok());
  Buffer moved(std::move(*empty));
  EXPECT_EQ(moved.data(), nullptr);
}

// Every call that needs a device fails with a status naming why there is none, never a crash.
TEST(DeviceTest, WithoutADeviceEveryCallSaysWhy) {
  if (device_count() > 0) GTEST_SKIP() << "a CUDA device is usable here";
  const std::string reason = unavailable_reason();
  float a[4] = {1, 2, 3, 4};
  float b[4] = {4, 3, 2, 1};
  const Status statuses[] = {
      set_device(0),
      Stream::create(0).status(),
      Event::create(0, true).status(),
      Buffer::allocate(0, 64).status(),
      copy(a, b, sizeof a),
      device::reduce_into(a, b, 4, DataType::kF32, ReduceOp::kSum),
      device::reduce(a, a, b, 4, DataType::kF32, ReduceOp::kMax),
      device::divide(a, 4, DataType::kF32, 2),
      device::scale(a, 4, DataType::kF32, 0.5),
  };
  for (const Status& s : statuses) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_THAT(s.message(), HasSubstr(reason));
  }
  EXPECT_EQ(a[0], 1.0f) << "nothing may be written";
  // Nothing can be queued without a device, so there is nothing to wait for.
  EXPECT_TRUE(synchronize(nullptr, Clock::now()).ok());
}

// The device kernels check their arguments exactly as the CPU ones do, before looking for a
// device, so a bad call fails alike with or without a GPU.
TEST(DeviceTest, BadArgumentsFailAsOnTheCpu) {
  if (!cuda_built()) GTEST_SKIP() << "without CUDA every call fails with: " << unavailable_reason();
  float x[8] = {};
  const auto bad_dtype = static_cast<DataType>(kBadEnum);
  const auto bad_op = static_cast<ReduceOp>(kBadEnum);
  const std::size_t too_many = std::numeric_limits<std::size_t>::max() / 2;
  struct Case {
    Status cpu;
    Status gpu;
  };
  const Case cases[] = {
      {hoop::reduce_into(nullptr, x, 4, DataType::kF32, ReduceOp::kSum),
       device::reduce_into(nullptr, x, 4, DataType::kF32, ReduceOp::kSum)},
      {hoop::reduce_into(x, nullptr, 4, DataType::kF32, ReduceOp::kSum),
       device::reduce_into(x, nullptr, 4, DataType::kF32, ReduceOp::kSum)},
      {hoop::reduce_into(x, x, 0, bad_dtype, ReduceOp::kSum),
       device::reduce_into(x, x, 0, bad_dtype, ReduceOp::kSum)},
      {hoop::reduce_into(x, x, 0, DataType::kF32, bad_op),
       device::reduce_into(x, x, 0, DataType::kF32, bad_op)},
      {hoop::reduce_into(x, x + 1, 4, DataType::kF32, ReduceOp::kSum),
       device::reduce_into(x, x + 1, 4, DataType::kF32, ReduceOp::kSum)},
      {hoop::reduce_into(x, x + 4, too_many, DataType::kF32, ReduceOp::kSum),
       device::reduce_into(x, x + 4, too_many, DataType::kF32, ReduceOp::kSum)},
      {hoop::reduce(x, nullptr, x, 4, DataType::kI32, ReduceOp::kMin),
       device::reduce(x, nullptr, x, 4, DataType::kI32, ReduceOp::kMin)},
      {hoop::reduce(x, x, x + 2, 4, DataType::kI32, ReduceOp::kProd),
       device::reduce(x, x, x + 2, 4, DataType::kI32, ReduceOp::kProd)},
      {hoop::divide(x, 4, DataType::kF32, 0), device::divide(x, 4, DataType::kF32, 0)},
      {hoop::divide(nullptr, 4, DataType::kF32, 2), device::divide(nullptr, 4, DataType::kF32, 2)},
      {hoop::divide(x, 4, bad_dtype, 2), device::divide(x, 4, bad_dtype, 2)},
  };
  for (const Case& c : cases) {
    ASSERT_EQ(c.cpu.code(), StatusCode::kInvalidArgument) << c.cpu.to_string();
    EXPECT_EQ(c.gpu.code(), c.cpu.code()) << c.gpu.to_string();
    EXPECT_EQ(c.gpu.message(), "device::" + c.cpu.message());
  }
  // scale: as the host's prescale, floats only; and a known dtype, a buffer.
  EXPECT_THAT(device::scale(x, 4, DataType::kI32, 0.5).message(),
              HasSubstr("only float types scale"));
  EXPECT_THAT(device::scale(x, 4, bad_dtype, 0.5).message(), HasSubstr("unknown dtype value 99"));
  EXPECT_THAT(device::scale(nullptr, 4, DataType::kF16, 0.5).message(), HasSubstr("buf is null"));
  EXPECT_TRUE(device::scale(nullptr, 0, DataType::kF16, 0.5).ok());
  // An event that was never created cannot be used.
  Event none;
  EXPECT_THAT(none.record(nullptr).message(), HasSubstr("Event::record: the event is empty"));
  EXPECT_THAT(none.query().status().message(), HasSubstr("Event::query: the event is empty"));
  EXPECT_THAT(none.make_wait(nullptr).message(), HasSubstr("Event::make_wait: the event is empty"));
}

// ---- GPU cases -------------------------------------------------------------------------------

class DeviceGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) GTEST_SKIP() << "no usable CUDA device: " << unavailable_reason();
    ASSERT_TRUE(set_device(0).ok());
  }
};

constexpr std::size_t kCounts[] = {0, 1, 7, 1031, (std::size_t{1} << 20) + 3};
constexpr std::size_t kLargestCount = (std::size_t{1} << 20) + 3;

// Offsets from a 256-byte aligned base: aligned (16-byte vectors), one element off (element
// accesses), one byte off (byte accesses; for u8 the same as one element).
std::vector<std::size_t> offsets_for(DataType dtype) {
  if (dtype_size(dtype) == 1) return {0, 1};
  return {0, dtype_size(dtype), 1};
}

std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> out(n);
  for (std::byte& b : out) b = static_cast<std::byte>(rng());
  return out;
}

// Whether element `i` is a NaN. The GPU returns the canonical NaN from arithmetic, where x86
// keeps an operand's payload, so a NaN matches any NaN; every other value matches bit for bit.
bool is_nan(DataType dtype, const std::byte* p) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, p, dtype_size(dtype));
  switch (dtype) {
    case DataType::kF16:
      return (bits & 0x7fffu) > 0x7c00u;
    case DataType::kBF16:
      return (bits & 0x7fffu) > 0x7f80u;
    case DataType::kF32:
      return (bits & 0x7fffffffu) > 0x7f800000u;
    case DataType::kF64:
      return (bits & 0x7fffffffffffffffu) > 0x7ff0000000000000u;
    default:
      return false;
  }
}

// The index of the first element where `got` differs from `want`, or count.
std::size_t first_difference(DataType dtype, const std::byte* got, const std::byte* want,
                             std::size_t count) {
  const std::size_t size = dtype_size(dtype);
  for (std::size_t i = 0; i < count; ++i) {
    const std::byte* g = got + i * size;
    const std::byte* w = want + i * size;
    if (std::memcmp(g, w, size) != 0 && !(is_nan(dtype, g) && is_nan(dtype, w))) return i;
  }
  return count;
}

// Three device buffers big enough for the largest case at any offset, reused by every case.
struct DeviceBuffers {
  Buffer dst, a, b;
  explicit DeviceBuffers(std::size_t bytes) {
    for (Buffer* buffer : {&dst, &a, &b}) {
      Status s = buffer->reserve(0, bytes + 256);
      if (!s.ok()) ADD_FAILURE() << s.to_string();
    }
  }
};

std::vector<std::byte> to_host(const std::byte* device, std::size_t bytes) {
  std::vector<std::byte> out(bytes);
  const Status s = copy(out.data(), device, bytes);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return out;
}

TEST_F(DeviceGpuTest, ReduceMatchesTheCpuBitForBit) {
  DeviceBuffers d(kLargestCount * 8);
  for (const DataType dtype : kAllDataTypes) {
    const std::size_t size = dtype_size(dtype);
    const std::vector<std::byte> a = random_bytes(kLargestCount * size, 1 + size);
    const std::vector<std::byte> b = random_bytes(kLargestCount * size, 2 + size);
    for (const ReduceOp op : kAllReduceOps) {
      for (const std::size_t count : kCounts) {
        for (const std::size_t offset : offsets_for(dtype)) {
          SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " " << op_name(op) << " count "
                                            << count << " offset " << offset);
          const std::size_t bytes = count * size;
          std::vector<std::byte> want(bytes);
          ASSERT_TRUE(hoop::reduce(want.data(), a.data(), b.data(), count, dtype, op).ok());
          std::byte* da = d.a.data() + offset;
          ASSERT_TRUE(copy(da, a.data(), bytes).ok());
          ASSERT_TRUE(copy(d.b.data() + offset, b.data(), bytes).ok());
          const Status out_of_place =
              device::reduce(d.dst.data() + offset, da, d.b.data() + offset, count, dtype, op);
          ASSERT_TRUE(out_of_place.ok()) << out_of_place.to_string();
          const Status in_place = device::reduce_into(da, d.b.data() + offset, count, dtype, op);
          ASSERT_TRUE(in_place.ok()) << in_place.to_string();
          for (const std::byte* result : {d.dst.data() + offset, da}) {
            const std::vector<std::byte> got = to_host(result, bytes);
            const std::size_t at = first_difference(dtype, got.data(), want.data(), count);
            ASSERT_EQ(at, count) << "first difference at element " << at
                                 << (result == da ? " (reduce_into)" : " (reduce)");
          }
        }
      }
    }
  }
}

// Runs an in-place device operation on `input` at every count and offset and compares it with
// host(want, input, count), the host's answer for the same input.
template <class Host, class Device>
void expect_in_place_matches(DeviceBuffers& d, DataType dtype, const std::vector<std::byte>& input,
                             Host host, Device on_device) {
  const std::size_t size = dtype_size(dtype);
  for (const std::size_t count : kCounts) {
    for (const std::size_t offset : offsets_for(dtype)) {
      SCOPED_TRACE(::testing::Message() << "count " << count << " offset " << offset);
      std::vector<std::byte> want(count * size);
      ASSERT_TRUE(host(want.data(), input.data(), count).ok());
      std::byte* buf = d.a.data() + offset;
      ASSERT_TRUE(copy(buf, input.data(), count * size).ok());
      const Status s = on_device(buf, count);
      ASSERT_TRUE(s.ok()) << s.to_string();
      const std::vector<std::byte> got = to_host(buf, count * size);
      ASSERT_EQ(first_difference(dtype, got.data(), want.data(), count), count);
    }
  }
}

TEST_F(DeviceGpuTest, DivideMatchesTheCpuBitForBit) {
  DeviceBuffers d(kLargestCount * 8);
  for (const DataType dtype : kAllDataTypes) {
    const std::size_t size = dtype_size(dtype);
    const std::vector<std::byte> input = random_bytes(kLargestCount * size, 3 + size);
    for (const std::int64_t divisor : {1, 3, 8}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " / " << divisor);
      expect_in_place_matches(
          d, dtype, input,
          [&](std::byte* want, const std::byte* in, std::size_t count) {
            std::memcpy(want, in, count * size);
            return hoop::divide(want, count, dtype, divisor);
          },
          [&](std::byte* buf, std::size_t count) {
            return device::divide(buf, count, dtype, divisor);
          });
    }
  }
}

TEST_F(DeviceGpuTest, ScaleMatchesTheHostPrescale) {
  DeviceBuffers d(kLargestCount * 8);
  for (const DataType dtype : {DataType::kF16, DataType::kBF16, DataType::kF32, DataType::kF64}) {
    const std::size_t size = dtype_size(dtype);
    const std::vector<std::byte> input = random_bytes(kLargestCount * size, 4 + size);
    for (const double factor : {0.125, 1.0 / 3.0, 1.0, 3.0e5}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " * " << factor);
      expect_in_place_matches(
          d, dtype, input,
          [&](std::byte* want, const std::byte* in, std::size_t count) {
            return hoop::scale_copy(want, in, count, dtype, factor);
          },
          [&](std::byte* buf, std::size_t count) {
            return device::scale(buf, count, dtype, factor);
          });
    }
  }
}

// Streams, events, buffers and copies together: host -> device on one stream, an event orders a
// second stream after it, device -> device and back to the host there.
TEST_F(DeviceGpuTest, StreamsEventsAndCopiesRoundTrip) {
  Result<Stream> first = Stream::create(0);
  Result<Stream> second = Stream::create(0);
  Result<Event> copied = Event::create(0);
  ASSERT_TRUE(first.ok() && second.ok() && copied.ok()) << first.status().to_string();
  EXPECT_EQ(first->device(), 0);
  Result<Buffer> a = Buffer::allocate(0, 1 << 20);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  Buffer b;
  ASSERT_TRUE(b.reserve(0, 1 << 20).ok());
  EXPECT_EQ(pointer_device(a->data()), 0);
  EXPECT_EQ(pointer_device(b.data() + 12345), 0);
  const std::byte* before = b.data();
  ASSERT_TRUE(b.reserve(0, 1000).ok());
  EXPECT_EQ(b.data(), before) << "reserve only grows";
  ASSERT_TRUE(b.reserve(0, 2 << 20).ok());
  EXPECT_EQ(b.size(), std::size_t{2} << 20);

  const std::vector<std::byte> input = random_bytes(1 << 20, 5);
  std::vector<std::byte> output(1 << 20);
  ASSERT_TRUE(copy(a->data(), input.data(), input.size(), first->handle()).ok());
  ASSERT_TRUE(copied->record(first->handle()).ok());
  ASSERT_TRUE(copied->make_wait(second->handle()).ok());
  ASSERT_TRUE(copy(b.data() + 1, a->data(), input.size(), second->handle()).ok());
  ASSERT_TRUE(copy(output.data(), b.data() + 1, output.size(), second->handle()).ok());
  ASSERT_TRUE(synchronize(second->handle(), Clock::now() + std::chrono::seconds(60)).ok());
  Result<bool> done = copied->query();
  ASSERT_TRUE(done.ok()) << done.status().to_string();
  EXPECT_TRUE(*done);
  EXPECT_EQ(output, input);

  Stream moved = std::move(*first);
  EXPECT_EQ(first->handle(), nullptr);
  EXPECT_NE(moved.handle(), nullptr);
  Result<Event> shared = Event::create(0, true);
  EXPECT_TRUE(shared.ok()) << shared.status().to_string();
}

TEST_F(DeviceGpuTest, WrongMemoryAndDevicesAreRejected) {
  Result<Buffer> buf = Buffer::allocate(0, 64);
  ASSERT_TRUE(buf.ok());
  float host[16] = {};
  const Status s = device::reduce_into(buf->data(), host, 16, DataType::kF32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("src is pageable host memory, which a kernel on CUDA device 0 cannot"));
  EXPECT_THAT(device::divide(host, 16, DataType::kF32, 2).message(),
              HasSubstr("device::divide: buf is pageable host memory"));
  EXPECT_THAT(set_device(device_count()).message(), HasSubstr("does not exist"));
  EXPECT_THAT(Stream::create(-1).status().message(), HasSubstr("CUDA device -1 does not exist"));
  EXPECT_THAT(Buffer::allocate(device_count(), 8).status().message(), HasSubstr("does not exist"));
}

#if HOOP_TEST_CUDA_BUILT
// A stream held by a host function that waits for a flag: synchronize must give up at its
// deadline, naming the device, and succeed once the stream drains.
TEST_F(DeviceGpuTest, SynchronizeStopsAtTheDeadline) {
  if (fake()) GTEST_SKIP() << "the fake device has no cudaLaunchHostFunc";
  Result<Stream> stream = Stream::create(0);
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  static std::atomic<bool> release{false};
  release = false;
  const auto hold = [](void*) {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  ASSERT_EQ(cudaLaunchHostFunc(static_cast<cudaStream_t>(stream->handle()), hold, nullptr),
            cudaSuccess);
  const Status timed_out =
      synchronize(stream->handle(), Clock::now() + std::chrono::milliseconds(200));
  release = true;
  EXPECT_EQ(timed_out.code(), StatusCode::kTimeout) << timed_out.to_string();
  EXPECT_THAT(timed_out.message(), HasSubstr("CUDA device 0"));
  const Status drained = synchronize(stream->handle(), Clock::now() + std::chrono::seconds(60));
  EXPECT_TRUE(drained.ok()) << drained.to_string();
}
#endif

// ---- the fake device (HOOP_FAKE_DEVICE) ---------------------------------------------------------

class FakeDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fake()) GTEST_SKIP() << "not the fake device (run with HOOP_FAKE_DEVICE=1)";
  }
};

// Work queued on a stream runs when something waits for it; the first query of its event says
// "not yet", so a protocol that reads before its event completed reads stale bytes.
TEST_F(FakeDeviceTest, StreamsRunTheirWorkWhenWaitedForAndEventsAnswerNotYetFirst) {
  Result<Stream> stream = Stream::create(0);
  Result<Event> done = Event::create(0);
  Result<Buffer> buf = Buffer::allocate(0, 64);
  ASSERT_TRUE(stream.ok() && done.ok() && buf.ok());
  EXPECT_EQ(pointer_device(buf->data() + 63), 0);
  EXPECT_EQ(pointer_device(buf->data() + 64), kCpuDevice);
  ASSERT_TRUE(zero(buf->data(), 64).ok());
  const std::vector<std::byte> input = random_bytes(64, 9);
  ASSERT_TRUE(copy(buf->data(), input.data(), 64, stream->handle()).ok());
  ASSERT_TRUE(done->record(stream->handle()).ok());
  EXPECT_FALSE(*done->query());
  EXPECT_EQ(std::memcmp(buf->data(), std::vector<std::byte>(64).data(), 64), 0) << "ran early";
  EXPECT_TRUE(*done->query());
  EXPECT_EQ(std::memcmp(buf->data(), input.data(), 64), 0);
  // wait() runs what the event waits for, as synchronize() does for a stream.
  ASSERT_TRUE(zero(buf->data(), 64, stream->handle()).ok());
  ASSERT_TRUE(done->record(stream->handle()).ok());
  ASSERT_TRUE(done->wait(Clock::now() + std::chrono::seconds(5)).ok());
  EXPECT_EQ(std::memcmp(buf->data(), std::vector<std::byte>(64).data(), 64), 0);
  EXPECT_THAT(Event().wait(Clock::now()).message(), HasSubstr("Event::wait: the event is empty"));
  // A stream made to wait for an event runs the other stream's work first.
  Result<Stream> second = Stream::create(0);
  std::vector<std::byte> out(64);
  ASSERT_TRUE(zero(buf->data(), 64, stream->handle()).ok());
  ASSERT_TRUE(done->record(stream->handle()).ok());
  ASSERT_TRUE(done->make_wait(second->handle()).ok());
  ASSERT_TRUE(copy(out.data(), buf->data(), 64, second->handle()).ok());
  ASSERT_TRUE(synchronize(second->handle(), Clock::now() + std::chrono::seconds(5)).ok());
  EXPECT_EQ(out, std::vector<std::byte>(64));
  EXPECT_FALSE(mps_active());
  EXPECT_THAT(describe(), HasSubstr("fake device"));
}

// Memory exported by one process and opened by another is the same memory, as through CUDA IPC.
TEST_F(FakeDeviceTest, ExportedMemoryIsSharedWithAnotherProcess) {
  Result<Buffer> buf = Buffer::allocate(0, 4096);
  ASSERT_TRUE(buf.ok());
  std::memset(buf->data(), 7, 4096);
  Result<IpcHandle> handle = export_memory(buf->data());
  ASSERT_TRUE(handle.ok()) << handle.status().to_string();
  EXPECT_FALSE(export_memory(buf->data() + 1).ok()) << "only an allocation's start";
  const pid_t child = ::fork();
  if (child == 0) {
    Result<IpcMapping> mapped = IpcMapping::open(*handle);
    const bool seen =
        mapped.ok() && mapped->base()[4095] == std::byte{7} && pointer_device(mapped->base()) == 0;
    if (mapped.ok()) mapped->base()[0] = std::byte{42};
    ::_exit(seen ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(buf->data()[0], std::byte{42});
  IpcHandle garbage;
  EXPECT_EQ(IpcMapping::open(garbage).status().code(), StatusCode::kProtocolError);
}

// Kernels reach device and pinned memory, not pageable memory, as on a GPU.
TEST_F(FakeDeviceTest, KernelsReachPinnedMemoryButNotPageableMemory) {
  PinnedBuffer pinned;
  ASSERT_TRUE(pinned.reserve(4 * sizeof(float)).ok());
  EXPECT_EQ(pointer_device(pinned.data()), kCpuDevice);
  auto* f = reinterpret_cast<float*>(pinned.data());
  for (int i = 0; i < 4; ++i) f[i] = static_cast<float>(i);
  EXPECT_TRUE(device::reduce_into(f, f, 4, DataType::kF32, ReduceOp::kSum).ok());
  EXPECT_EQ(f[3], 6.0f);
  float pageable[4] = {};
  EXPECT_THAT(device::reduce_into(f, pageable, 4, DataType::kF32, ReduceOp::kSum).message(),
              HasSubstr("src is pageable host memory"));
}

}  // namespace
}  // namespace hoop::device
