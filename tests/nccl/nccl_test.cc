// collectives/nccl without a GPU: hoop's dtypes, ops and errors in NCCL's terms, the backend's
// registration when libhoop loads, and the set-up errors that come before any device is touched.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "collectives/nccl/nccl_backend.h"
#include "collectives/nccl/nccl_types.h"
#include "collectives/algorithms/device_path.h"
#include "device/device.h"
#include "hoop/rendezvous.h"

namespace hoop::nccl {
namespace {

using ::testing::HasSubstr;

TEST(NcclTypes, EveryDtypeMapsToItsNcclType) {
  const std::pair<DataType, ncclDataType_t> expected[] = {
      {DataType::kU8, ncclUint8},    {DataType::kI8, ncclInt8},     {DataType::kI32, ncclInt32},
      {DataType::kI64, ncclInt64},   {DataType::kF16, ncclFloat16}, {DataType::kBF16, ncclBfloat16},
      {DataType::kF32, ncclFloat32}, {DataType::kF64, ncclFloat64}};
  static_assert(std::size(expected) + 1 == std::size(kAllDataTypes));
  for (const auto& [dtype, type] : expected) {
    Result<ncclDataType_t> got = to_nccl_dtype(dtype);
    ASSERT_TRUE(got.ok()) << dtype_name(dtype) << ": " << got.status().to_string();
    EXPECT_EQ(*got, type) << dtype_name(dtype);
  }
  // NCCL has no 16-bit integer type: reducing i16 is refused, naming where the device path
  // sends it; moving i16 goes as float16 bits, every other dtype as itself.
  Result<ncclDataType_t> i16 = to_nccl_dtype(DataType::kI16);
  EXPECT_EQ(i16.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(i16.status().message(), HasSubstr("routes i16 reductions to CUDA IPC or staging"));
  Result<ncclDataType_t> carried = to_nccl_carrier(DataType::kI16);
  ASSERT_TRUE(carried.ok()) << carried.status().to_string();
  EXPECT_EQ(*carried, ncclFloat16);
  for (const auto& [dtype, type] : expected) EXPECT_EQ(*to_nccl_carrier(dtype), type);
}

// kAvg is a sum and hoop's divide, never ncclAvg (which scales each float input first).
TEST(NcclTypes, EveryOpMapsAndAvgSumsThenDivides) {
  const struct {
    ReduceOp op;
    ncclRedOp_t nccl;
    bool divide;
  } expected[] = {{ReduceOp::kSum, ncclSum, false},
                  {ReduceOp::kAvg, ncclSum, true},
                  {ReduceOp::kMin, ncclMin, false},
                  {ReduceOp::kMax, ncclMax, false},
                  {ReduceOp::kProd, ncclProd, false}};
  static_assert(std::size(expected) == std::size(kAllReduceOps));
  for (const auto& e : expected) {
    Result<NcclOp> got = to_nccl_op(e.op);
    ASSERT_TRUE(got.ok()) << op_name(e.op) << ": " << got.status().to_string();
    EXPECT_EQ(got->op, e.nccl) << op_name(e.op);
    EXPECT_EQ(got->divide, e.divide) << op_name(e.op);
  }
}

TEST(NcclTypes, UnknownDtypeOrOpIsInvalidArgumentNamingTheValue) {
  const Status dtype = to_nccl_dtype(static_cast<DataType>(99)).status();
  EXPECT_EQ(dtype.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(dtype.message(), HasSubstr("dtype value 99"));
  const Status op = to_nccl_op(static_cast<ReduceOp>(42)).status();
  EXPECT_EQ(op.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(op.message(), HasSubstr("op value 42"));
}

TEST(NcclTypes, ErrorsNameTheCallAndTheRankWithACodeForTheCause) {
  EXPECT_TRUE(nccl_status(ncclSuccess, "ncclAllReduce", 0, nullptr).ok());
  const struct {
    ncclResult_t result;
    StatusCode code;
  } cases[] = {{ncclInvalidArgument, StatusCode::kInvalidArgument},
               {ncclInvalidUsage, StatusCode::kInvalidArgument},
               {ncclRemoteError, StatusCode::kPeerLost},
               {ncclSystemError, StatusCode::kIoError},
               {ncclUnhandledCudaError, StatusCode::kIoError},
               {ncclInternalError, StatusCode::kInternal}};
  for (const auto& c : cases) {
    const Status s = nccl_status(c.result, "ncclAllReduce", 3, nullptr);
    EXPECT_EQ(s.code(), c.code) << s.to_string();
    EXPECT_THAT(s.message(), HasSubstr("ncclAllReduce failed on rank 3: "));
    EXPECT_THAT(s.message(), HasSubstr(ncclGetErrorString(c.result)));
  }
}

// HOOP_GPU_BACKEND=nccl finds the backend in a build with CUDA and NCCL (this test exists only
// there), without any call into collectives/nccl first: loading libhoop registered it.
TEST(NcclBackend, IsRegisteredWhenLibhoopLoads) {
  EXPECT_TRUE(collectives::device_backend_registered("nccl"));
  EXPECT_FALSE(library_version().empty());
}

TEST(NcclBackend, ManyRanksWithoutAStoreIsInvalidArgument) {
  collectives::DeviceBackendSetup setup;
  setup.rank = 0;
  setup.size = 2;
  const Status s = make_backend(setup).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("rendezvous store"));
}

// A rank whose rank 0 never publishes NCCL's id gives up at its timeout, naming what it waited
// for; no device is needed to get that far.
TEST(NcclBackend, WaitingForRankZerosIdTimesOutNamingTheKey) {
  StoreOptions options;
  options.secret = "nccl-test-secret";
  options.job_id = "nccl-test";
  options.timeout = std::chrono::milliseconds(5000);
  Result<std::unique_ptr<StoreServer>> server = StoreServer::start("127.0.0.1", 0, options);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  Result<std::unique_ptr<Store>> store = Store::connect("127.0.0.1", (*server)->port(), options, 1);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  collectives::DeviceBackendSetup setup;
  setup.rank = 1;
  setup.size = 2;
  setup.store = store->get();
  setup.key_prefix = "job/gpu/nccl";
  setup.timeout = std::chrono::milliseconds(200);
  const Status s = make_backend(setup).status();
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.to_string();
  EXPECT_THAT(s.message(),
              HasSubstr("rank 1 waiting for rank 0's NCCL id (store key job/gpu/nccl/id)"));
}

TEST(NcclBackend, WithoutADeviceFailsInsteadOfHanging) {
  if (device::device_count() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  collectives::DeviceBackendSetup setup;
  setup.timeout = std::chrono::milliseconds(5000);
  const Status s = make_backend(setup).status();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.code(), StatusCode::kTimeout) << s.to_string();
}

}  // namespace
}  // namespace hoop::nccl
