#include "bench/hoop_bench_peer.h"

#include <fmt/format.h>

#include <cstdlib>
#include <utility>

#include "bench/hoop_bench_device.h"

namespace hoop::bench {

HoopPeer::HoopPeer(std::unique_ptr<Communicator> comm, Algorithm algorithm, int device,
                   bool nonblocking)
    : comm_(std::move(comm)), algorithm_(algorithm), device_(device), nonblocking_(nonblocking) {}

template <typename Options>
Status HoopPeer::call(Status (*blocking)(Communicator&, const Options&),
                      Request (*nonblocking)(Communicator&, const Options&), const Options& o) {
  if (!nonblocking_) return blocking(*comm_, o);
  return nonblocking(*comm_, o).wait();
}

int HoopPeer::rank() const { return comm_->rank(); }

int HoopPeer::size() const { return comm_->size(); }

std::string HoopPeer::describe(const std::string& what) const {
  // The device route (NCCL, CUDA IPC or staged) is HOOP_GPU_BACKEND's choice, made inside hoop.
  const char* backend = std::getenv("HOOP_GPU_BACKEND");
  const std::string memory = device_ == kCpuDevice
                                 ? std::string()
                                 : fmt::format(", buffers on cuda:{} (HOOP_GPU_BACKEND={})",
                                               device_, backend != nullptr ? backend : "auto");
  return fmt::format("hoop {}{}, transport {}{}", what,
                     nonblocking_ ? " (non-blocking form and its wait)" : "",
                     comm_->transport().name(), memory);
}

std::string HoopPeer::description() const {
  // kAuto still honours HOOP_ALGO, so the header names what the communicator will force.
  const Algorithm shown = algorithm_ != Algorithm::kAuto ? algorithm_ : comm_->forced_algorithm();
  return describe(fmt::format("allreduce, algo {}", algorithm_name(shown)));
}

std::string HoopPeer::describe_collective(BenchCollective collective) const {
  if (collective == BenchCollective::kAllreduce) return description();
  return describe(std::string(collective_name(collective)));
}

Status HoopPeer::supports(DataType /*dtype*/, ReduceOp /*op*/) const {
  // hoop reduces every DataType with every ReduceOp.
  return Status::success();
}

Status HoopPeer::allreduce(const void* send, void* recv, std::size_t count, DataType dtype,
                           ReduceOp op) {
  AllreduceOptions o;
  o.input = send;
  o.output = recv;
  o.count = count;
  o.dtype = dtype;
  o.op = op;
  o.algorithm = algorithm_;
  return call(&hoop::allreduce, &hoop::iallreduce, o);
}

Status HoopPeer::run(const CollectiveCall& c) {
  switch (c.collective) {
    case BenchCollective::kAllreduce:
      return allreduce(c.input, c.output, c.count, c.dtype, c.op);
    case BenchCollective::kBroadcast:
      // The root's input is its buffer (the same as its output in place); the others receive.
      return call(&hoop::broadcast, &hoop::ibroadcast,
                  BroadcastOptions{.buffer = rank() == c.root ? c.input : c.output,
                                   .count = c.count,
                                   .dtype = c.dtype,
                                   .root = c.root});
    case BenchCollective::kAllgather:
      return call(
          &hoop::allgather, &hoop::iallgather,
          AllgatherOptions{
              .input = c.input, .output = c.output, .count = c.count, .dtype = c.dtype});
    case BenchCollective::kReduceScatter:
      return call(&hoop::reduce_scatter, &hoop::ireduce_scatter,
                  ReduceScatterOptions{.input = c.input,
                                       .output = c.output,
                                       .count = c.count,
                                       .dtype = c.dtype,
                                       .op = c.op});
    case BenchCollective::kAlltoall:
      return call(
          &hoop::alltoall, &hoop::ialltoall,
          AlltoallOptions{
              .input = c.input, .output = c.output, .count = c.count, .dtype = c.dtype});
    case BenchCollective::kReduce:
      return call(&hoop::reduce, &hoop::ireduce,
                  RootReduceOptions{.input = c.input,
                                    .output = c.output,
                                    .count = c.count,
                                    .dtype = c.dtype,
                                    .op = c.op,
                                    .root = c.root});
    case BenchCollective::kGather:
      return call(&hoop::gather, &hoop::igather,
                  GatherOptions{.input = c.input,
                                .output = c.output,
                                .count = c.count,
                                .dtype = c.dtype,
                                .root = c.root});
    case BenchCollective::kScatter:
      return call(&hoop::scatter, &hoop::iscatter,
                  ScatterOptions{.input = c.input,
                                 .output = c.output,
                                 .count = c.count,
                                 .dtype = c.dtype,
                                 .root = c.root});
    case BenchCollective::kSendrecv: {
      const int n = size();
      const SendOptions to{
          .data = c.input, .count = c.count, .dtype = c.dtype, .peer = (rank() + 1) % n};
      const RecvOptions from{
          .data = c.output, .count = c.count, .dtype = c.dtype, .peer = (rank() + n - 1) % n};
      if (nonblocking_) return hoop::isendrecv(*comm_, to, from).wait();
      return hoop::sendrecv(*comm_, to, from);
    }
  }
  return invalid_argument("hoop-bench: unknown collective");
}

Result<std::unique_ptr<BenchBuffer>> HoopPeer::allocate(std::size_t bytes) {
  if (device_ == kCpuDevice) return AllreducePeer::allocate(bytes);
  return device_buffer(device_, bytes);
}

Status HoopPeer::barrier() { return hoop::barrier(*comm_); }

namespace {

// One value reduced in place over all ranks.
template <typename T>
Result<T> allreduce_scalar(Communicator& comm, T value, DataType dtype, ReduceOp op) {
  HOOP_RETURN_IF_ERROR(hoop::allreduce(
      comm, {.input = &value, .output = &value, .count = 1, .dtype = dtype, .op = op}));
  return value;
}

}  // namespace

Result<double> HoopPeer::max_over_ranks(double value) {
  return allreduce_scalar(*comm_, value, DataType::kF64, ReduceOp::kMax);
}

Result<std::int64_t> HoopPeer::sum_over_ranks(std::int64_t value) {
  return allreduce_scalar(*comm_, value, DataType::kI64, ReduceOp::kSum);
}

Result<std::vector<std::string>> HoopPeer::gather_lines(const std::string& line) {
  constexpr std::size_t kWidth = 256;  // fixed-size records keep this to one allgather
  std::string record = line.substr(0, kWidth - 1);
  record.resize(kWidth, '\0');
  std::string all(kWidth * static_cast<std::size_t>(size()), '\0');
  AllgatherOptions o;
  o.input = record.data();
  o.output = all.data();
  o.count = kWidth;
  o.dtype = DataType::kU8;
  HOOP_RETURN_IF_ERROR(hoop::allgather(*comm_, o));
  std::vector<std::string> lines;
  for (int r = 0; r < size(); ++r) lines.emplace_back(all.c_str() + r * kWidth);
  return lines;
}

}  // namespace hoop::bench
