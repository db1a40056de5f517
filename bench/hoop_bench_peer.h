// HoopPeer: hoop's collectives and point-to-point sendrecv behind the shared nccl-tests loops
// (bench/common).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/common/collective_bench.h"
#include "hoop/communicator.h"

namespace hoop::bench {

class HoopPeer final : public CollectivePeer {
 public:
  /// `algorithm` is passed to every timed allreduce; kAuto leaves the choice to hoop. The
  /// benchmark's buffers live on CUDA device `device`, or in host memory for kCpuDevice. With
  /// `nonblocking`, each timed call is the non-blocking form (iallreduce, ...) and its wait, so
  /// that the table shows what handing a call to the communicator's thread costs.
  HoopPeer(std::unique_ptr<Communicator> comm, Algorithm algorithm, int device = kCpuDevice,
           bool nonblocking = false);

  int rank() const override;
  int size() const override;
  std::string description() const override;
  Status supports(DataType dtype, ReduceOp op) const override;
  Status allreduce(const void* send, void* recv, std::size_t count, DataType dtype,
                   ReduceOp op) override;
  Status barrier() override;
  Result<double> max_over_ranks(double value) override;
  Result<std::int64_t> sum_over_ranks(std::int64_t value) override;
  Result<std::vector<std::string>> gather_lines(const std::string& line) override;
  Result<std::unique_ptr<BenchBuffer>> allocate(std::size_t bytes) override;
  std::string describe_collective(BenchCollective collective) const override;
  Status run(const CollectiveCall& call) override;

 private:
  /// "hoop <what>, transport tcp[, buffers on cuda:0]": the table header's implementation line.
  std::string describe(const std::string& what) const;
  /// `blocking(comm, o)`, or with --nonblocking `nonblocking(comm, o)` and its wait.
  template <typename Options>
  Status call(Status (*blocking)(Communicator&, const Options&),
              Request (*nonblocking)(Communicator&, const Options&), const Options& o);

  std::unique_ptr<Communicator> comm_;
  Algorithm algorithm_;
  int device_;
  bool nonblocking_;
};

}  // namespace hoop::bench
