// collectives/nccl on a GPU: a 1-rank NCCL communicator runs every collective in each of its forms
// (out of place, input null, input equal to the output) and must leave exactly what hoop's host
// collectives leave. Skips, naming the reason, where no CUDA device is usable.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/nccl/nccl_backend.h"
#include "device/device.h"
#include "hoop/communicator.h"
#include "tests/comm/comm_reference.h"

namespace hoop::nccl {
namespace {

using ::testing::HasSubstr;

constexpr std::chrono::seconds kTimeout{60};

/// Seeded inputs of comm_check's generator: exact in every float dtype.
std::vector<std::byte> values(DataType dtype, std::size_t count, std::uint64_t seed) {
  std::vector<std::byte> out(count * dtype_size(dtype));
  comm_check::gen(seed, 0, dtype, count, out.data());
  return out;
}

/// How a call passes its input: its own buffer, null (in place), or the output pointer.
enum class Form { kOutOfPlace, kNullInput, kSameBuffer };
const char* form_name(Form f) {
  return f == Form::kOutOfPlace  ? "out of place"
         : f == Form::kNullInput ? "input null"
                                 : "input == output";
}

/// One collective with the given buffers, on the host communicator (device false) or the NCCL
/// backend (device true).
using Call = std::function<Status(const void* in, void* out, bool device)>;

class NcclGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device::device_count() == 0)
      GTEST_SKIP() << "no usable CUDA device: " << device::unavailable_reason();
    ASSERT_TRUE(device::set_device(0).ok());
    collectives::DeviceBackendSetup setup;
    setup.device = 0;
    setup.timeout = kTimeout;
    Result<std::unique_ptr<collectives::DeviceBackend>> backend = make_backend(setup);
    ASSERT_TRUE(backend.ok()) << backend.status().to_string();
    backend_ = std::move(*backend);
    Result<device::Stream> stream = device::Stream::create(0);
    ASSERT_TRUE(stream.ok()) << stream.status().to_string();
    stream_ = std::move(*stream);
    Result<std::unique_ptr<Communicator>> host = Communicator::create();
    ASSERT_TRUE(host.ok()) << host.status().to_string();
    host_ = std::move(*host);
  }

  Deadline deadline() const { return Clock::now() + kTimeout; }

  device::Buffer upload(const std::vector<std::byte>& bytes) {
    Result<device::Buffer> buffer = device::Buffer::allocate(0, bytes.size());
    EXPECT_TRUE(buffer.ok()) << buffer.status().to_string();
    if (!buffer.ok()) return {};
    EXPECT_TRUE(device::copy(buffer->data(), bytes.data(), bytes.size()).ok());
    return std::move(*buffer);
  }

  std::vector<std::byte> download(const device::Buffer& buffer, std::size_t bytes) {
    std::vector<std::byte> out(bytes);
    EXPECT_TRUE(device::copy(out.data(), buffer.data(), bytes).ok());
    return out;
  }

  /// Runs `call` on host buffers and on device copies of them in `form` (in place, the output
  /// starts as `input`) and expects the same output bytes.
  void expect_host_result(const std::string& what, const std::vector<std::byte>& input,
                          std::size_t out_bytes, Form form, const Call& call) {
    SCOPED_TRACE(what + ", " + form_name(form));
    const bool in_place = form != Form::kOutOfPlace;
    std::vector<std::byte> host_out = in_place ? input : std::vector<std::byte>(out_bytes);
    host_out.resize(out_bytes, std::byte{0x5a});
    const void* host_in = form == Form::kOutOfPlace   ? input.data()
                          : form == Form::kSameBuffer ? host_out.data()
                                                      : nullptr;
    const std::vector<std::byte> device_start = host_out;
    const Status on_host = call(host_in, host_out.data(), false);
    ASSERT_TRUE(on_host.ok()) << on_host.to_string();

    const device::Buffer in = upload(input);
    const device::Buffer out = upload(device_start);
    const void* device_in = form == Form::kOutOfPlace   ? in.data()
                            : form == Form::kSameBuffer ? out.data()
                                                        : nullptr;
    const Status on_device = call(device_in, out.data(), true);
    ASSERT_TRUE(on_device.ok()) << on_device.to_string();
    EXPECT_TRUE(download(out, out_bytes) == host_out);
  }

  std::unique_ptr<collectives::DeviceBackend> backend_;
  device::Stream stream_;
  std::unique_ptr<Communicator> host_;
};

constexpr Form kForms[] = {Form::kOutOfPlace, Form::kNullInput, Form::kSameBuffer};
constexpr std::size_t kCount = 1031;

TEST_F(NcclGpuTest, AllreduceOfEveryDtypeAndOpMatchesTheHost) {
  for (const DataType dtype : kAllDataTypes) {
    if (dtype == DataType::kI16) continue;  // NCCL has no 16-bit integers (nccl_test checks)
    for (const ReduceOp op : kAllReduceOps) {
      for (const Form form : kForms) {
        const std::string what = fmt::format("allreduce {} {}", dtype_name(dtype), op_name(op));
        expect_host_result(what, values(dtype, kCount, 1), kCount * dtype_size(dtype), form,
                           [&](const void* in, void* out, bool device) {
                             const AllreduceOptions o{in, out, kCount, dtype, op};
                             return device ? backend_->allreduce(o, stream_.handle(), deadline())
                                           : allreduce(*host_, o);
                           });
      }
    }
  }
}

TEST_F(NcclGpuTest, BroadcastAllgatherReduceScatterAndAlltoallMatchTheHost) {
  for (const DataType dtype : kAllDataTypes) {
    // i16 is moved as float16 bits; NCCL cannot reduce it (nccl_test checks the refusal).
    const bool reducible = dtype != DataType::kI16;
    const std::size_t bytes = kCount * dtype_size(dtype);
    const std::vector<std::byte> input = values(dtype, kCount, 5);
    expect_host_result(fmt::format("broadcast {}", dtype_name(dtype)), input, bytes,
                       Form::kSameBuffer, [&](const void*, void* out, bool device) {
                         const BroadcastOptions o{out, kCount, dtype, 0};
                         return device ? backend_->broadcast(o, stream_.handle(), deadline())
                                       : broadcast(*host_, o);
                       });
    for (const Form form : kForms) {
      expect_host_result(fmt::format("allgather {}", dtype_name(dtype)), input, bytes, form,
                         [&](const void* in, void* out, bool device) {
                           const AllgatherOptions o{in, out, kCount, dtype};
                           return device ? backend_->allgather(o, stream_.handle(), deadline())
                                         : allgather(*host_, o);
                         });
      expect_host_result(fmt::format("alltoall {}", dtype_name(dtype)), input, bytes, form,
                         [&](const void* in, void* out, bool device) {
                           const AlltoallOptions o{in, out, kCount, dtype};
                           return device ? backend_->alltoall(o, stream_.handle(), deadline())
                                         : alltoall(*host_, o);
                         });
      for (const ReduceOp op : kAllReduceOps) {
        if (!reducible) break;
        expect_host_result(fmt::format("reduce_scatter {} {}", dtype_name(dtype), op_name(op)),
                           input, bytes, form, [&](const void* in, void* out, bool device) {
                             const ReduceScatterOptions o{in, out, kCount, dtype, op};
                             return device
                                        ? backend_->reduce_scatter(o, stream_.handle(), deadline())
                                        : reduce_scatter(*host_, o);
                           });
      }
    }
  }
}

TEST_F(NcclGpuTest, CountZeroIsOkWithNullBuffers) {
  void* s = stream_.handle();
  EXPECT_TRUE(backend_->allreduce({nullptr, nullptr, 0}, s, deadline()).ok());
  EXPECT_TRUE(backend_->broadcast({nullptr, 0}, s, deadline()).ok());
  EXPECT_TRUE(backend_->allgather({nullptr, nullptr, 0}, s, deadline()).ok());
  EXPECT_TRUE(backend_->reduce_scatter({nullptr, nullptr, 0}, s, deadline()).ok());
  EXPECT_TRUE(backend_->alltoall({nullptr, nullptr, 0}, s, deadline()).ok());
}

TEST_F(NcclGpuTest, AfterAnAbortEveryCallFailsWithTheCause) {
  backend_->abort(peer_lost("rank 3 (host b) died"));
  const device::Buffer buffer = upload(values(DataType::kF32, kCount, 2));
  const Status s =
      backend_->allreduce({buffer.data(), buffer.data(), kCount}, stream_.handle(), deadline());
  EXPECT_EQ(s.code(), StatusCode::kPeerLost) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("rank 3 (host b) died"));
  // Even an empty call reports it: the communicator is gone.
  EXPECT_EQ(backend_->broadcast({nullptr, 0}, stream_.handle(), deadline()).code(),
            StatusCode::kPeerLost);
}

}  // namespace
}  // namespace hoop::nccl
