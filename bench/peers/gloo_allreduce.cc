// peer_gloo_allreduce: Gloo's allreduce algorithms over its TCP transport, through the shared
// nccl-tests loop. Launch it with mpirun (as a plain process launcher) or hooprun:
//
//   mpirun --allow-run-as-root -np 4 build/bin/peer_gloo_allreduce --algo halving_doubling
//   build/bin/hooprun -np 4 build/bin/peer_gloo_allreduce --algo ring_chunked
//
// Rendezvous goes through hoop's store when hooprun provides one, else through a
// gloo::rendezvous::FileStore in a directory every rank can see (--store-dir, by default one
// named after mpirun's job id under the temp directory).
//
// AllreduceRingChunked and AllreduceHalvingDoubling reduce in place; their out-of-place column
// is a memcpy into the output followed by the in-place algorithm, which is what a Gloo user who
// needs to keep the input pays. --algo ring is gloo::allreduce (the options API that PyTorch's
// ProcessGroupGloo calls), which takes separate input and output buffers.
#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/config.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include "bench/common/allreduce_bench.h"
#include "hoop/rendezvous.h"
#include "hoop/version.h"

namespace hoop::bench {
namespace {

// gloo::rendezvous::Store over hoop's authenticated store, for jobs started by hooprun.
class HoopGlooStore final : public gloo::rendezvous::Store {
 public:
  HoopGlooStore(std::unique_ptr<hoop::Store> store, std::chrono::milliseconds timeout)
      : store_(std::move(store)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    throw_if_error(store_->set(key, std::string_view(data.data(), data.size())));
  }

  // Gloo expects get() to wait for the key, as its FileStore does.
  std::vector<char> get(const std::string& key) override {
    const std::string value = store_->wait_get(key, timeout_).value();
    return std::vector<char>(value.begin(), value.end());
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    throw_if_error(store_->wait(keys, timeout));
  }

 private:
  std::unique_ptr<hoop::Store> store_;
  std::chrono::milliseconds timeout_;
};

// Calls fn(T{}) with the C++ type Gloo reduces for `dtype`; false when Gloo has none (bf16).
template <typename Fn>
bool with_gloo_type(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kU8:
      fn(std::uint8_t{});
      return true;
    case DataType::kI8:
      fn(std::int8_t{});
      return true;
    case DataType::kI16:
      fn(std::int16_t{});
      return true;
    case DataType::kI32:
      fn(std::int32_t{});
      return true;
    case DataType::kI64:
      fn(std::int64_t{});
      return true;
    case DataType::kF16:
      fn(gloo::float16{});  // same binary16 bit layout as hoop's f16
      return true;
    case DataType::kF32:
      fn(float{});
      return true;
    case DataType::kF64:
      fn(double{});
      return true;
    case DataType::kBF16:
      return false;
  }
  return false;
}

template <typename T>
const gloo::ReductionFunction<T>* reduction_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return gloo::ReductionFunction<T>::sum;
    case ReduceOp::kProd:
      return gloo::ReductionFunction<T>::product;
    case ReduceOp::kMin:
      return gloo::ReductionFunction<T>::min;
    case ReduceOp::kMax:
      return gloo::ReductionFunction<T>::max;
    case ReduceOp::kAvg:
    case ReduceOp::kAdasum:
      return nullptr;
  }
  return nullptr;
}

using ReduceFn = void (*)(void*, const void*, const void*, std::size_t);

// The element-wise function gloo::allreduce takes (output, input 1, input 2, count).
template <typename T>
ReduceFn options_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return static_cast<ReduceFn>(&gloo::sum<T>);
    case ReduceOp::kProd:
      return static_cast<ReduceFn>(&gloo::product<T>);
    case ReduceOp::kMin:
      return static_cast<ReduceFn>(&gloo::min<T>);
    case ReduceOp::kMax:
      return static_cast<ReduceFn>(&gloo::max<T>);
    case ReduceOp::kAvg:
    case ReduceOp::kAdasum:
      return nullptr;
  }
  return nullptr;
}

enum class Algo { kRingChunked, kHalvingDoubling, kRing };

// An algorithm object is bound to one buffer and count when built (it registers transport
// buffers and allocates inboxes), so it is built at the first call for a case -- a warm-up
// iteration -- and reused while the case repeats.
struct BoundAlgorithm {
  void* buffer = nullptr;
  std::size_t count = 0;
  DataType dtype = DataType::kF32;
  ReduceOp op = ReduceOp::kSum;
  std::unique_ptr<gloo::Algorithm> algorithm;

  bool matches(void* b, std::size_t c, DataType d, ReduceOp o) const {
    return algorithm && buffer == b && count == c && dtype == d && op == o;
  }
};

class GlooPeer final : public AllreducePeer {
 public:
  GlooPeer(std::shared_ptr<gloo::Context> context, Algo algo, std::string algo_name,
           std::string transport)
      : context_(std::move(context)),
        algo_(algo),
        algo_name_(std::move(algo_name)),
        transport_(std::move(transport)) {}

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }

  std::string description() const override {
    std::string how = algo_ == Algo::kRing ? "gloo::allreduce(RING)"
                                           : "in-place algorithm; out-of-place adds a memcpy";
    return fmt::format("Gloo {}.{}.{}, {} over tcp {}, {}", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR,
                       GLOO_VERSION_PATCH, algo_name_, transport_, how);
  }

  Status supports(DataType dtype, ReduceOp op) const override {
    if (dtype == DataType::kBF16)
      return invalid_argument("Gloo has no bf16 type (use f16 f32 f64 i32 i64 u8 i8)");
    if (op == ReduceOp::kAvg) return invalid_argument("Gloo has no avg op (use sum min max prod)");
    return Status::success();
  }

  Status allreduce(const void* send, void* recv, std::size_t count, DataType dtype,
                   ReduceOp op) override {
    if (count > static_cast<std::size_t>(INT_MAX))
      return invalid_argument(fmt::format("Gloo counts are int; {} elements is too many", count));
    try {
      if (algo_ == Algo::kRing) {
        run_ring(send, recv, count, dtype, op);
        return Status::success();
      }
      if (send != recv) std::memcpy(recv, send, count * dtype_size(dtype));
      BoundAlgorithm& slot = send == recv ? in_place_ : out_of_place_;
      if (!slot.matches(recv, count, dtype, op)) {
        slot.algorithm.reset();  // free the old inboxes before allocating new ones
        slot.algorithm = build(recv, count, dtype, op);
        slot.buffer = recv;
        slot.count = count;
        slot.dtype = dtype;
        slot.op = op;
      }
      slot.algorithm->run();
      return Status::success();
    } catch (const std::exception& e) {
      return io_error(fmt::format("gloo {} allreduce: {}", algo_name_, e.what()));
    }
  }

  Status barrier() override {
    try {
      gloo::BarrierOptions opts(context_);
      opts.setTag(next_tag());
      gloo::barrier(opts);
      return Status::success();
    } catch (const std::exception& e) {
      return io_error(fmt::format("gloo barrier: {}", e.what()));
    }
  }

  Result<double> max_over_ranks(double value) override {
    HOOP_RETURN_IF_ERROR(scalar_allreduce(&value, options_function<double>(ReduceOp::kMax)));
    return value;
  }

  Result<std::int64_t> sum_over_ranks(std::int64_t value) override {
    HOOP_RETURN_IF_ERROR(scalar_allreduce(&value, options_function<std::int64_t>(ReduceOp::kSum)));
    return value;
  }

  Result<std::vector<std::string>> gather_lines(const std::string& line) override {
    constexpr std::size_t kWidth = 256;  // fixed-size records keep this to one allgather
    std::string record = line.substr(0, kWidth - 1);
    record.resize(kWidth, '\0');
    std::string all(kWidth * static_cast<std::size_t>(size()), '\0');
    try {
      gloo::AllgatherOptions opts(context_);
      opts.setInput(record.data(), kWidth);
      opts.setOutput(all.data(), all.size());
      opts.setTag(next_tag());
      gloo::allgather(opts);
    } catch (const std::exception& e) {
      return io_error(fmt::format("gloo allgather: {}", e.what()));
    }
    std::vector<std::string> lines;
    for (int r = 0; r < size(); ++r) lines.emplace_back(all.c_str() + r * kWidth);
    return lines;
  }

 private:
  std::unique_ptr<gloo::Algorithm> build(void* buffer, std::size_t count, DataType dtype,
                                         ReduceOp op) {
    std::unique_ptr<gloo::Algorithm> out;
    with_gloo_type(dtype, [&]<typename T>(T) {
      std::vector<T*> ptrs{static_cast<T*>(buffer)};
      const int n = static_cast<int>(count);
      if (algo_ == Algo::kRingChunked) {
        out = std::make_unique<gloo::AllreduceRingChunked<T>>(context_, ptrs, n,
                                                              reduction_function<T>(op));
      } else {
        out = std::make_unique<gloo::AllreduceHalvingDoubling<T>>(context_, ptrs, n,
                                                                  reduction_function<T>(op));
      }
    });
    return out;
  }

  void run_ring(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op) {
    with_gloo_type(dtype, [&]<typename T>(T) {
      gloo::AllreduceOptions opts(context_);
      if (send != recv) opts.setInput(static_cast<T*>(const_cast<void*>(send)), count);
      opts.setOutput(static_cast<T*>(recv), count);
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setReduceFunction(options_function<T>(op));
      opts.setTag(next_tag());
      gloo::allreduce(opts);
    });
  }

  template <typename T>
  Status scalar_allreduce(T* value, ReduceFn fn) {
    try {
      gloo::AllreduceOptions opts(context_);
      opts.setOutput(value, 1);
      opts.setReduceFunction(fn);
      opts.setTag(next_tag());
      gloo::allreduce(opts);
      return Status::success();
    } catch (const std::exception& e) {
      return io_error(fmt::format("gloo allreduce of one value: {}", e.what()));
    }
  }

  // Tags tell concurrent unbound-buffer operations apart; ours run one at a time, so a counter
  // that every rank advances alike is enough.
  std::uint32_t next_tag() { return tag_++; }

  std::shared_ptr<gloo::Context> context_;
  Algo algo_;
  std::string algo_name_;
  std::string transport_;
  BoundAlgorithm out_of_place_;
  BoundAlgorithm in_place_;
  std::uint32_t tag_ = 1;
};

// The FileStore directory: --store-dir, else one per mpirun job, else (one rank) a fresh one.
Result<std::filesystem::path> store_directory(const std::string& flag, int size) {
  if (!flag.empty()) return std::filesystem::path(flag);
  const auto tmp = std::filesystem::temp_directory_path();
  if (const char* job = std::getenv("OMPI_MCA_ess_base_jobid"); job != nullptr)
    return tmp / fmt::format("hoop-gloo-rendezvous-{}", job);
  if (size == 1) return tmp / fmt::format("hoop-gloo-rendezvous-pid{}", getpid());
  return invalid_argument(
      "no rendezvous: run under hooprun or mpirun, or give --store-dir (a directory every rank "
      "sees, empty or new)");
}

// An integer environment variable, or nullopt when unset or malformed.
std::optional<int> env_int(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > INT_MAX) return std::nullopt;
  return static_cast<int>(value);
}

// hooprun gives a store, and hoop's bootstrap reads it; mpirun gives only the rank layout,
// which hoop's bootstrap refuses without a store, so it is read here and paired with a
// FileStore instead.
Result<BootstrapInfo> launcher_info() {
  if (std::getenv("HOOP_RENDEZVOUS_ADDR") != nullptr) return bootstrap_from_env();
  BootstrapInfo info;
  for (const auto& [rank_var, size_var] :
       {std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        std::pair{"HOOP_RANK", "HOOP_SIZE"}}) {
    const std::optional<int> rank = env_int(rank_var);
    const std::optional<int> size = env_int(size_var);
    if (!rank || !size) continue;
    if (*rank >= *size)
      return invalid_argument(
          fmt::format("{}={} is not below {}={}", rank_var, *rank, size_var, *size));
    info.rank = *rank;
    info.size = *size;
    info.launcher = rank_var;
    break;
  }
  return info;
}

int run(int argc, char** argv) {
  const Result<BootstrapInfo> info = launcher_info();
  if (!info.ok()) {
    fmt::print(stderr, "peer_gloo_allreduce: {}\n", info.status().to_string());
    return 2;
  }
  CLI::App app{"Gloo's allreduce over TCP, timed and checked like nccl-tests' all_reduce_perf"};
  app.set_version_flag("--version", hoop::version_line("peer_gloo_allreduce"));
  BenchOptions options;
  add_bench_flags(app, options);
  std::string algo_name = "ring_chunked";
  app.add_option("--algo", algo_name, "Gloo algorithm")
      ->check(CLI::IsMember({"ring_chunked", "halving_doubling", "ring"}))
      ->capture_default_str();
  std::string hostname = "127.0.0.1";
  app.add_option("--hostname", hostname, "Address Gloo's TCP transport listens on")
      ->capture_default_str();
  std::string store_dir_flag;
  app.add_option("--store-dir", store_dir_flag,
                 "FileStore rendezvous directory when not under hooprun");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return info->rank == 0 ? app.exit(e) : e.get_exit_code();
  }
  const Algo algo = algo_name == "ring_chunked"       ? Algo::kRingChunked
                    : algo_name == "halving_doubling" ? Algo::kHalvingDoubling
                                                      : Algo::kRing;
  try {
    std::shared_ptr<gloo::rendezvous::Store> store;
    std::filesystem::path store_dir;
    if (!info->store_host.empty()) {
      store = std::make_shared<HoopGlooStore>(connect_store(*info).value(), info->timeout);
    } else {
      store_dir = store_directory(store_dir_flag, info->size).value();
      std::filesystem::create_directories(store_dir);
      store = std::make_shared<gloo::rendezvous::FileStore>(store_dir.string());
    }
    gloo::rendezvous::PrefixStore prefixed("peer_gloo_allreduce", *store);
    gloo::transport::tcp::attr attr;
    attr.hostname = hostname;
    auto context = std::make_shared<gloo::rendezvous::Context>(info->rank, info->size);
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    context->connectFullMesh(prefixed, device);

    GlooPeer peer(context, algo, algo_name, hostname);
    const Result<std::int64_t> wrong =
        run_allreduce_bench(options, peer, "peer_gloo_allreduce", stdout);
    const bool bad_args = !wrong.ok() && wrong.status().code() == StatusCode::kInvalidArgument;
    if (!wrong.ok() && (info->rank == 0 || !bad_args))
      fmt::print(stderr, "[{}] peer_gloo_allreduce: {}\n", info->rank, wrong.status().to_string());
    if (!wrong.ok()) return bad_args ? 2 : 1;
    // Every rank has finished with the store before rank 0 removes the directory it named.
    throw_if_error(peer.barrier());
    if (info->rank == 0 && store_dir_flag.empty() && !store_dir.empty())
      std::filesystem::remove_all(store_dir);
    return *wrong == 0 ? 0 : 3;
  } catch (const std::exception& e) {
    fmt::print(stderr, "[{}] peer_gloo_allreduce: {}\n", info->rank, e.what());
    return 1;
  }
}

}  // namespace
}  // namespace hoop::bench

int main(int argc, char** argv) { return hoop::bench::run(argc, argv); }
