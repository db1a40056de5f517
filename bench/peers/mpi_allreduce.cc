// peer_mpi_allreduce: MPI's collectives (out-of-place and MPI_IN_PLACE) through the shared
// nccl-tests loops, so that Open MPI's numbers sit next to hoop's in the same table.
// --collective picks one: MPI_Allreduce (the default, which gave the program its name),
// MPI_Bcast, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall, MPI_Reduce, MPI_Gather,
// MPI_Scatter or MPI_Sendrecv (to rank + 1, from rank - 1).
//
//   mpirun --allow-run-as-root -np 2 --mca pml ob1 --mca btl self,tcp
//          build/bin/peer_mpi_allreduce -b 8 -e 64M -f 2 [--collective reduce] --json mpi.json
#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdlib>
#include <optional>

#include "bench/common/collective_bench.h"
#include "hoop/version.h"

namespace hoop::bench {
namespace {

std::optional<MPI_Datatype> mpi_type(DataType dtype) {
  switch (dtype) {
    case DataType::kU8:
      return MPI_UINT8_T;
    case DataType::kI8:
      return MPI_INT8_T;
    case DataType::kI16:
      return MPI_INT16_T;
    case DataType::kI32:
      return MPI_INT32_T;
    case DataType::kI64:
      return MPI_INT64_T;
    case DataType::kF32:
      return MPI_FLOAT;
    case DataType::kF64:
      return MPI_DOUBLE;
    case DataType::kF16:
    case DataType::kBF16:
      return std::nullopt;  // MPI 3.1 has no 16-bit float types
  }
  return std::nullopt;
}

std::optional<MPI_Op> mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kProd:
      return MPI_PROD;
    case ReduceOp::kAvg:
      return std::nullopt;  // MPI has no averaging op
    case ReduceOp::kAdasum:
      return std::nullopt;
  }
  return std::nullopt;
}

Status mpi_status(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return Status::success();
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return io_error(fmt::format("{} failed: {}", call, text));
}

// The launcher passes --mca settings as OMPI_MCA_* variables; naming them in the header says
// which transport the numbers are for.
std::string mca_setting(const char* name) {
  const char* value = std::getenv(fmt::format("OMPI_MCA_{}", name).c_str());
  return value != nullptr ? value : "default";
}

// The MPI function a table measures.
const char* mpi_function(BenchCollective collective) {
  switch (collective) {
    case BenchCollective::kAllreduce:
      return "MPI_Allreduce";
    case BenchCollective::kBroadcast:
      return "MPI_Bcast";
    case BenchCollective::kAllgather:
      return "MPI_Allgather";
    case BenchCollective::kReduceScatter:
      return "MPI_Reduce_scatter_block";
    case BenchCollective::kAlltoall:
      return "MPI_Alltoall";
    case BenchCollective::kReduce:
      return "MPI_Reduce";
    case BenchCollective::kGather:
      return "MPI_Gather";
    case BenchCollective::kScatter:
      return "MPI_Scatter";
    case BenchCollective::kSendrecv:
      return "MPI_Sendrecv";
  }
  return "MPI";
}

class MpiPeer final : public CollectivePeer {
 public:
  MpiPeer() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::string description() const override {
    return describe_collective(BenchCollective::kAllreduce);
  }

  std::string describe_collective(BenchCollective collective) const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string name(version, static_cast<std::size_t>(length));
    name = name.substr(0, name.find_first_of(",\n"));
    return fmt::format("{}, {}, pml {}, btl {}", name, mpi_function(collective), mca_setting("pml"),
                       mca_setting("btl"));
  }

  Status supports(DataType dtype, ReduceOp op) const override {
    if (!mpi_type(dtype))
      return invalid_argument(
          fmt::format("MPI has no {} type (use f32 f64 i32 i64 u8 i8)", dtype_name(dtype)));
    if (!mpi_op(op))
      return invalid_argument(fmt::format("MPI has no {} op (use sum min max prod)", op_name(op)));
    return Status::success();
  }

  Status allreduce(const void* send, void* recv, std::size_t count, DataType dtype,
                   ReduceOp op) override {
    if (count > static_cast<std::size_t>(INT_MAX))
      return invalid_argument(fmt::format("MPI counts are int; {} elements is too many", count));
    const void* source = send == recv ? MPI_IN_PLACE : send;
    return mpi_status(MPI_Allreduce(source, recv, static_cast<int>(count), *mpi_type(dtype),
                                    *mpi_op(op), MPI_COMM_WORLD),
                      "MPI_Allreduce");
  }

  Status run(const CollectiveCall& c) override;

  Status barrier() override { return mpi_status(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

  Result<double> max_over_ranks(double value) override {
    double out = 0;
    HOOP_RETURN_IF_ERROR(mpi_status(
        MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce"));
    return out;
  }

  Result<std::int64_t> sum_over_ranks(std::int64_t value) override {
    std::int64_t out = 0;
    HOOP_RETURN_IF_ERROR(mpi_status(
        MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce"));
    return out;
  }

  Result<std::vector<std::string>> gather_lines(const std::string& line) override {
    constexpr int kWidth = 256;  // fixed-size records keep this to one MPI_Gather
    std::string record = line.substr(0, kWidth - 1);
    record.resize(kWidth, '\0');
    std::string all(static_cast<std::size_t>(kWidth) * static_cast<std::size_t>(size_), '\0');
    HOOP_RETURN_IF_ERROR(mpi_status(MPI_Gather(record.data(), kWidth, MPI_CHAR, all.data(), kWidth,
                                               MPI_CHAR, 0, MPI_COMM_WORLD),
                                    "MPI_Gather"));
    std::vector<std::string> lines;
    for (int r = 0; r < size_; ++r) lines.emplace_back(all.c_str() + r * kWidth);
    return lines;
  }

 private:
  int rank_ = 0;
  int size_ = 1;
};

// Collectives that only move data move bytes, so every dtype runs (MPI 3.1 has no 16-bit
// floats); the reducing ones use the dtype's MPI type, which supports() has checked.
Status MpiPeer::run(const CollectiveCall& c) {
  const std::size_t bytes = c.count * dtype_size(c.dtype);
  if (bytes > static_cast<std::size_t>(INT_MAX))
    return invalid_argument(fmt::format("MPI counts are int; {} bytes is too many", bytes));
  const int count = static_cast<int>(c.count);
  const int nbytes = static_cast<int>(bytes);
  const bool root_in_place = c.in_place && rank_ == c.root;
  // MPI takes MPI_IN_PLACE where hoop takes aliased buffers (collective_bench.h).
  void* const in_place_input = c.in_place ? MPI_IN_PLACE : c.input;
  int rc = MPI_SUCCESS;
  switch (c.collective) {
    case BenchCollective::kAllreduce:
      return allreduce(c.input, c.output, c.count, c.dtype, c.op);
    case BenchCollective::kBroadcast:
      rc =
          MPI_Bcast(rank_ == c.root ? c.input : c.output, nbytes, MPI_BYTE, c.root, MPI_COMM_WORLD);
      break;
    case BenchCollective::kAllgather:
      rc = MPI_Allgather(in_place_input, nbytes, MPI_BYTE, c.output, nbytes, MPI_BYTE,
                         MPI_COMM_WORLD);
      break;
    case BenchCollective::kReduceScatter:
      rc = MPI_Reduce_scatter_block(in_place_input, c.output, count, *mpi_type(c.dtype),
                                    *mpi_op(c.op), MPI_COMM_WORLD);
      break;
    case BenchCollective::kAlltoall:
      rc = MPI_Alltoall(in_place_input, nbytes, MPI_BYTE, c.output, nbytes, MPI_BYTE,
                        MPI_COMM_WORLD);
      break;
    case BenchCollective::kReduce:
      rc = MPI_Reduce(root_in_place ? MPI_IN_PLACE : c.input, c.output, count, *mpi_type(c.dtype),
                      *mpi_op(c.op), c.root, MPI_COMM_WORLD);
      break;
    case BenchCollective::kGather:
      rc = MPI_Gather(root_in_place ? MPI_IN_PLACE : c.input, nbytes, MPI_BYTE, c.output, nbytes,
                      MPI_BYTE, c.root, MPI_COMM_WORLD);
      break;
    case BenchCollective::kScatter:
      rc = MPI_Scatter(c.input, nbytes, MPI_BYTE, root_in_place ? MPI_IN_PLACE : c.output, nbytes,
                       MPI_BYTE, c.root, MPI_COMM_WORLD);
      break;
    case BenchCollective::kSendrecv:
      rc =
          MPI_Sendrecv(c.input, nbytes, MPI_BYTE, (rank_ + 1) % size_, 0, c.output, nbytes,
                       MPI_BYTE, (rank_ + size_ - 1) % size_, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      break;
  }
  return mpi_status(rc, mpi_function(c.collective));
}

int run(int argc, char** argv) {
  MpiPeer peer;
  CLI::App app{"Open MPI's collectives, timed and checked like nccl-tests' *_perf programs"};
  app.set_version_flag("--version", hoop::version_line("peer_mpi_allreduce"));
  BenchOptions options;
  add_bench_flags(app, options);
  std::string collective = "allreduce";
  app.add_option("--collective", collective,
                 "allreduce, broadcast, allgather, reduce_scatter, alltoall, reduce, gather, "
                 "scatter or sendrecv")
      ->check([](const std::string& name) -> std::string {
        return parse_collective(name) ? "" : fmt::format("unknown collective '{}'", name);
      })
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return peer.rank() == 0 ? app.exit(e) : e.get_exit_code();
  }
  const Result<std::int64_t> wrong = run_collective_bench(
      options, peer, *parse_collective(collective), "peer_mpi_allreduce", stdout);
  if (!wrong.ok()) {
    if (peer.rank() == 0 || wrong.status().code() != StatusCode::kInvalidArgument)
      fmt::print(stderr, "[{}] peer_mpi_allreduce: {}\n", peer.rank(), wrong.status().to_string());
    // Bad arguments are found alike on every rank; anything else may leave peers waiting.
    return wrong.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  return *wrong == 0 ? 0 : 3;
}

}  // namespace
}  // namespace hoop::bench

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  // Failures come back as error codes so that they are reported with their cause.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int rc = hoop::bench::run(argc, argv);
  if (rc == 1) MPI_Abort(MPI_COMM_WORLD, rc);  // peers may be waiting in a collective
  MPI_Finalize();
  return rc;
}
