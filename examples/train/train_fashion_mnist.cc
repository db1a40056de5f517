// train_fashion_mnist: data-parallel training of an MLP or LeNet-5 on Fashion-MNIST with
// hoop's bundled training core, one process per worker.
//
//   build/bin/hooprun -np 2 build/bin/train_fashion_mnist --epochs 1 [--device cuda]
//   build/bin/hooprun -np 3 build/bin/train_fashion_mnist --strategy ps   # 2 workers, 1 server
//
// Every rank loads the dataset (Debian's dataset-fashion-mnist), takes its share of each
// global batch (copied to its GPU with --device cuda), and averages gradients through hoop's
// runtime while backward runs, or (--strategy ps, ps-async, kvstore) pushes them to where the
// parameters are served and pulls the parameters back. Rank 0 prints per-epoch loss, test
// accuracy and throughput, and at the end the seed study's metrics: throughput, speedup over
// one worker, scaling efficiency, step time, the time split and a memory breakdown.
#include <fmt/format.h>
#include <hoop/elastic.h>
#include <hoop/hoop.h>
#include <hoop/train.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "hoop/version.h"
#include "report.h"

namespace {

namespace ht = hoop::train;
using train_example::now_seconds;

struct Flags {
  std::string model = "lenet5";
  int epochs = 1;
  int batch = 64;
  float lr = 0.02f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  std::string optimizer = "sgd";
  std::string strategy = "allreduce";
  std::string device = "cpu";
  std::string data_dir;
  std::uint64_t seed = 42;
  int backward_passes = 1;
  bool fp16 = false;
  double baseline_throughput = 0;
  int baseline_steps = 50;
  long max_steps = -1;
  std::string save_params;
  std::string progress = "auto";
  int threads = 1;
  bool elastic = false;
  int commit_every = 20;
};

std::unique_ptr<ht::Optimizer> make_optimizer(const Flags& f, std::vector<ht::Parameter*> params) {
  if (f.optimizer == "sgd") return ht::sgd(std::move(params), f.lr, f.momentum, f.weight_decay);
  return ht::adam(std::move(params), f.lr, 0.9f, 0.999f, 1e-8f, f.weight_decay);
}

// `x` on `device`: itself on the CPU, else a copy in `staging`.
const ht::Tensor& on_device(const ht::Tensor& x, int device, ht::Tensor& staging) {
  if (device == hoop::kCpuDevice) return x;
  staging = x.to(device);
  return staging;
}

// Test loss and accuracy over the whole test split: each rank evaluates a contiguous share and
// the sums are added up across the ranks.
std::pair<double, double> evaluate(ht::Sequential& model, const ht::Dataset& test, int device) {
  const std::size_t n = test.size();
  const std::size_t begin = n * hoop::rank() / hoop::size();
  const std::size_t end = n * (hoop::rank() + 1) / hoop::size();
  const std::size_t per_image = test.images.size() / std::max<std::size_t>(n, 1);
  double sums[3] = {0, 0, static_cast<double>(end - begin)};  // loss sum, correct, count
  constexpr std::size_t kBatch = 1000;
  for (std::size_t i = begin; i < end; i += kBatch) {
    const std::size_t b = std::min(kBatch, end - i);
    ht::Tensor x({static_cast<std::int64_t>(b), 1, test.images.dim(2), test.images.dim(3)});
    std::copy_n(test.images.data() + i * per_image, b * per_image, x.data());
    const std::vector<int> y(test.labels.begin() + i, test.labels.begin() + i + b);
    ht::Tensor staging;
    const ht::Tensor logits = model.forward(on_device(x, device, staging), false);
    sums[0] += ht::softmax_cross_entropy(logits, y, nullptr) * static_cast<double>(b);
    sums[1] += static_cast<double>(ht::count_correct(logits, y));
  }
  hoop::Tensor view{sums, hoop::DataType::kF64, {3}};
  hoop::allreduce("eval.sums", view, view, {.op = hoop::ReduceOp::kSum});
  return {sums[0] / sums[2], sums[1] / sums[2]};
}

// Samples per second of one worker alone (no communication) at this batch size: rank 0 trains
// a copy of the model for `steps` steps while the other ranks wait.
double measure_one_worker(const Flags& f, const ht::Dataset& train, int device) {
  double throughput = 0;
  if (hoop::rank() == 0) {
    ht::Sequential model = ht::make_model(f.model, f.seed);
    model.to(device);
    auto opt = make_optimizer(f, model.parameters());
    ht::ShardedLoader loader(train, f.batch, 0, 1, f.seed);
    loader.start_epoch(0);
    ht::Tensor x, staging, grad;
    std::vector<int> y;
    const int steps = std::min<int>(f.baseline_steps, static_cast<int>(loader.steps_per_epoch()));
    double start = 0;
    for (int s = -2; s < steps && loader.next(x, y); ++s) {  // two warm-up steps
      if (s == 0) start = now_seconds();
      (void)ht::softmax_cross_entropy(model.forward(on_device(x, device, staging), true), y, &grad);
      model.backward(grad);
      opt->step();
      opt->zero_grad();
    }
    ht::synchronize(device);
    throughput = steps * static_cast<double>(f.batch) / (now_seconds() - start);
  }
  hoop::Tensor view{&throughput, hoop::DataType::kF64, {1}};
  hoop::broadcast("baseline.throughput", view, 0);
  return throughput;
}

void save_parameters(ht::Sequential& model, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  for (ht::Parameter* p : model.parameters()) {
    const ht::Tensor value = p->value.to(hoop::kCpuDevice);
    out << p->name << ' ' << value.size() << '\n';
    out.write(reinterpret_cast<const char*>(value.data()),
              static_cast<std::streamsize>(value.bytes()));
  }
  if (!out) throw hoop::Error(hoop::io_error("cannot write parameters to " + path));
}

std::size_t activation_bytes(ht::Sequential& model) {
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < model.layer_count(); ++i) bytes += model.layer(i).activation_bytes();
  return bytes;
}

// Activations are measured during training (evaluation keeps none); the rest here.
train_example::MemoryBreakdown memory_of(ht::Sequential& model, const ht::Optimizer& opt,
                                         const ht::DistributedOptimizer& dist,
                                         const ht::Tensor& batch) {
  train_example::MemoryBreakdown m;
  for (ht::Parameter* p : model.parameters()) {
    m.weights += p->value.bytes();
    m.gradients += p->grad.bytes();
  }
  m.optimizer_state = opt.state_bytes();
  m.workspace = dist.workspace_bytes() + batch.bytes();
  for (std::size_t i = 0; i < model.layer_count(); ++i)
    m.workspace += model.layer(i).workspace_bytes();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  m.peak_rss = static_cast<std::size_t>(usage.ru_maxrss) * 1024;
  return m;
}

int run(const Flags& f) {
  // Checked before init() too, so that a job asking for a GPU it cannot have fails at once.
  (void)ht::parse_device(f.device, 0);
  if (f.elastic && f.device != "cpu")
    throw hoop::Error(hoop::invalid_argument("--elastic trains on the CPU only (--device cpu)"));
  const ht::Strategy strategy = ht::parse_strategy(f.strategy);
  if (strategy != ht::Strategy::kAllreduce &&
      (f.elastic || f.device != "cpu" || f.backward_passes != 1 || f.fp16))
    throw hoop::Error(hoop::invalid_argument(
        fmt::format("--strategy {} trains on the CPU with one backward pass per step; "
                    "--elastic, --device, --backward-passes-per-step and --fp16-allreduce "
                    "need --strategy allreduce",
                    f.strategy)));
  hoop::init();
  const int rank = hoop::rank();
  const int size = hoop::size();
  const int device = ht::parse_device(f.device, hoop::local_rank());
  ht::set_compute_threads(f.threads);
  const std::string dir = f.data_dir.empty() ? ht::default_data_dir() : f.data_dir;
  const ht::Dataset train = ht::load_fashion_mnist(dir, true);
  const ht::Dataset test = ht::load_fashion_mnist(dir, false);

  ht::Sequential model = ht::make_model(f.model, f.seed);
  model.to(device);
  auto opt = make_optimizer(f, model.parameters());
  ht::DistributedOptions options;
  options.backward_passes_per_step = f.backward_passes;
  options.compression = f.fp16 ? ht::Compression::kFp16 : ht::Compression::kNone;
  ht::DistributedOptimizer dist(model, *opt, options);
  // An elastic job's state, parameters included, goes out from rank 0 at every round's start.
  if (!f.elastic) ht::broadcast_parameters(model, 0);
  // ps, ps-async, kvstore: the exchange's server (or each shard's owner) runs the optimizer.
  std::unique_ptr<ht::ParameterExchange> exchange;
  if (strategy != ht::Strategy::kAllreduce)
    exchange = std::make_unique<ht::ParameterExchange>(
        strategy, model, [&](std::vector<ht::Parameter*> params) {
          return make_optimizer(f, std::move(params));
        });
  const bool server = exchange && exchange->is_server();
  const int workers = exchange ? exchange->workers() : size;

  // Where training stands: an elastic job's state, which a reset restores, holds it with the
  // parameters and the optimizer's buffers. `seen` counts the examples of the epoch already
  // trained on, so that a job that changed size goes on with the rest.
  std::int32_t epoch = 0;
  std::uint64_t seen = 0;
  hoop::elastic::State state;
  state.add_value("epoch", epoch);
  state.add_value("seen", seen);
  if (f.elastic) ht::add_to_state(state, model, *opt);
  // A step cut off by a reset leaves allreduces and partial gradients behind.
  state.register_reset_callback([&] { dist.reset(); });
  const std::size_t per_epoch_cap =
      f.max_steps >= 0 ? static_cast<std::size_t>(f.max_steps) : SIZE_MAX;
  if (rank == 0)
    std::printf("%s on %d worker(s), batch %d per worker, %zu parameters, data %s%s%s, %s%s\n",
                f.model.c_str(), workers, f.batch, model.parameter_count(), dir.c_str(),
                device == hoop::kCpuDevice ? "" : ", on CUDA devices",
                f.elastic ? ", elastic" : "", f.strategy.c_str(),
                server || (exchange && ht::has_server(strategy))
                    ? fmt::format(" (server: rank {})", size - 1).c_str()
                    : "");
  std::fflush(stdout);

  double throughput_1 = f.baseline_throughput;
  std::string baseline_source = "--baseline-throughput";
  if (throughput_1 <= 0 && f.baseline_steps > 0 && size > 1 && !f.elastic) {
    throughput_1 = measure_one_worker(f, train, device);
    baseline_source = fmt::format("measured on rank 0 alone, {} steps", f.baseline_steps);
  }

  train_example::TimeSplit split;
  std::size_t activations = 0;
  std::size_t trained = 0;  // examples this rank trained on
  ht::Tensor x, staging, grad;
  std::vector<int> y;
  const auto train_epochs = [&] {
    // The data shards are the workers': a server takes worker 0's only to count the steps.
    const int r = exchange ? std::max(exchange->worker(), 0) : hoop::rank();
    const int n = exchange ? workers : hoop::size();
    ht::ShardedLoader loader(train, f.batch, r, n, f.seed);
    const bool progress = hoop::rank() == 0 && f.progress != "off";
    for (; epoch < f.epochs; ++epoch, seen = 0) {
      if (f.elastic && seen == 0) state.commit();
      loader.start_epoch(epoch, seen);
      // A micro-batch per backward pass: an update takes backward_passes of them.
      const std::size_t updates =
          std::min(loader.steps_per_epoch(), per_epoch_cap) / f.backward_passes;
      const std::size_t per_update = static_cast<std::size_t>(f.backward_passes) * f.batch * n;
      train_example::ProgressBar bar(epoch + 1, f.epochs, updates, progress);
      dist.reset_timers();
      if (exchange) exchange->reset_timers();
      const double epoch_start = now_seconds();
      double loss_sum = 0;
      if (server) exchange->serve(updates);
      for (std::size_t u = 0; u < (server ? 0 : updates); ++u) {
        for (int pass = 0; pass < f.backward_passes; ++pass) {
          const double t0 = now_seconds();
          loader.next(x, y);
          const ht::Tensor& input = on_device(x, device, staging);
          const double t1 = now_seconds();
          loss_sum += ht::softmax_cross_entropy(model.forward(input, true), y, &grad);
          // What forward keeps for backward is largest now, between the two.
          activations = std::max(activations, activation_bytes(model));
          model.backward(grad, exchange ? std::function<void(std::size_t)>{} : dist.hook());
          split.data += t1 - t0;
          split.compute += now_seconds() - t1;
        }
        const double t2 = now_seconds();
        if (exchange) {
          exchange->step();  // all of it communication: the update runs where it is served
        } else {
          const double waited = dist.waiting_seconds();
          dist.step();
          split.compute += now_seconds() - t2 - (dist.waiting_seconds() - waited);
        }
        seen += per_update;
        trained += per_update / n;
        const double elapsed = now_seconds() - epoch_start;
        bar.update(u + 1, loss_sum / ((u + 1) * f.backward_passes), (u + 1) * per_update / elapsed);
        if (f.elastic && (u + 1) % static_cast<std::size_t>(f.commit_every) == 0) state.commit();
      }
      const double epoch_time = now_seconds() - epoch_start;
      bar.finish();
      split.total += epoch_time;
      split.waiting += exchange ? exchange->waiting_seconds() : dist.waiting_seconds();
      split.communication +=
          exchange ? exchange->waiting_seconds() : dist.communication_seconds();
      // ps-async leaves each worker with the parameters of its last pull: evaluate the server's.
      if (exchange && ht::has_server(strategy)) ht::broadcast_parameters(model, size - 1);
      const auto [test_loss, accuracy] = evaluate(model, test, device);
      double train_loss = updates ? loss_sum / (updates * f.backward_passes) : 0.0;
      hoop::Tensor view{&train_loss, hoop::DataType::kF64, {1}};
      // The mean over the workers (a server trained on nothing and adds 0).
      hoop::allreduce("epoch.loss", view, view, {.op = hoop::ReduceOp::kSum});
      train_loss /= n;
      // The slowest rank's epoch is the job's, as in the summary's time_n: the epoch line of a
      // one-epoch run then gives the summary's samples/s.
      double slowest_epoch = epoch_time;
      hoop::Tensor slowest_view{&slowest_epoch, hoop::DataType::kF64, {1}};
      hoop::allreduce("epoch.time", slowest_view, slowest_view, {.op = hoop::ReduceOp::kMax});
      if (hoop::rank() == 0)
        std::printf(
            "epoch %d/%d: train loss %.4f, test loss %.4f, test accuracy %.2f %%, "
            "%.2f s, %.1f samples/s%s\n",
            epoch + 1, f.epochs, train_loss, test_loss, 100 * accuracy, slowest_epoch,
            updates * per_update / slowest_epoch,
            f.elastic ? fmt::format(" ({} workers)", n).c_str() : "");
      std::fflush(stdout);
    }
  };
  if (f.elastic) {
    // The seed study's figures assume one fixed set of workers; an elastic run reports its
    // wall time and its resets instead.
    int resets = 0;
    state.register_reset_callback([&] { ++resets; });
    const double start = now_seconds();
    hoop::elastic::run(state, train_epochs);
    if (hoop::rank() == 0)
      std::printf(
          "== elastic run: %s, %d epoch(s) in %.2f s (evaluations included), %d "
          "reset(s) on rank 0, %d worker(s) in round %d at the end\n",
          f.model.c_str(), f.epochs, now_seconds() - start, resets, hoop::size(),
          hoop::elastic::round());
    if (hoop::rank() == 0 && !f.save_params.empty()) save_parameters(model, f.save_params);
    hoop::shutdown();
    return 0;
  }
  train_epochs();
  const int size_now = hoop::size();
  const std::size_t updates = trained / (static_cast<std::size_t>(f.batch) * f.backward_passes);

  train_example::RunSummary summary;
  summary.model = f.model;
  summary.strategy = f.strategy;
  summary.workers = exchange ? workers : size_now;
  summary.batch_per_worker = f.batch;
  summary.epochs = f.epochs;
  summary.examples_per_worker = updates * f.backward_passes * f.batch / f.epochs;
  summary.memory = memory_of(model, *opt, dist, x);
  summary.memory.activations = activations;
  summary.updates = updates;
  // The slowest rank's loop is the job's time; the split is the mean over the workers (a
  // server adds zeros).
  double times[5] = {split.data, split.compute, split.waiting, split.communication, split.total};
  if (server) std::fill(std::begin(times), std::end(times), 0.0);
  hoop::Tensor times_view{times, hoop::DataType::kF64, {5}};
  hoop::allreduce("summary.split", times_view, times_view, {.op = hoop::ReduceOp::kSum});
  for (double& t : times) t /= summary.workers;
  if (strategy == ht::Strategy::kParameterServerAsync) {
    // The server's histogram, to rank 0 (a worker), which prints the summary.
    constexpr std::size_t kBuckets = 64;  // the last one holds every age from 63 up
    std::vector<double> ages(kBuckets, 0.0);
    for (std::size_t k = 0; k < exchange->staleness().size(); ++k)
      ages[std::min(k, kBuckets - 1)] += static_cast<double>(exchange->staleness()[k]);
    hoop::Tensor ages_view{ages.data(), hoop::DataType::kF64,
                           {static_cast<std::int64_t>(kBuckets)}};
    hoop::allreduce("summary.staleness", ages_view, ages_view, {.op = hoop::ReduceOp::kSum});
    while (ages.size() > 1 && ages.back() == 0) ages.pop_back();
    for (double a : ages) summary.staleness.push_back(static_cast<std::uint64_t>(a));
  }
  double slowest = split.total;
  hoop::Tensor slowest_view{&slowest, hoop::DataType::kF64, {1}};
  hoop::allreduce("summary.time", slowest_view, slowest_view, {.op = hoop::ReduceOp::kMax});
  summary.split = {times[0], times[1], times[2], times[3], times[4]};
  summary.time_n = slowest;
  summary.throughput_1 = throughput_1;
  summary.throughput_1_source = baseline_source;
  if (size_now == 1 && throughput_1 <= 0) {  // one worker is its own baseline
    summary.throughput_1 = slowest > 0 ? summary.examples_per_worker * f.epochs / slowest : 0;
    summary.throughput_1_source = "this run";
  }
  if (hoop::rank() == 0) {
    train_example::print_summary(stdout, summary);
    if (!f.save_params.empty()) save_parameters(model, f.save_params);
  }
  hoop::shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"Data-parallel training on Fashion-MNIST with hoop's training core"};
  app.set_version_flag("--version", hoop::version_line("train_fashion_mnist"));
  // --help shows each option's default (the Flags' initial values).
  app.option_defaults()->always_capture_default();
  // Integer bounds: CLI11 2.1's PositiveNumber prints the largest double when it refuses 0.
  const CLI::Validator positive = CLI::Range(1, 1 << 30).description("POSITIVE");
  const CLI::Validator non_negative = CLI::Range(0, 1 << 30).description("NONNEGATIVE");
  app.add_option("--model", f.model, "mlp or lenet5")->check(CLI::IsMember({"mlp", "lenet5"}));
  app.add_option("--epochs", f.epochs, "passes over the training set")->check(positive);
  app.add_option("--batch-size", f.batch, "examples per worker per backward pass")->check(positive);
  app.add_option("--lr", f.lr, "learning rate")
      ->check(CLI::Range(1e-9, 1e3).description("POSITIVE"));
  app.add_option("--momentum", f.momentum, "SGD momentum")->check(CLI::Range(0.0, 0.999));
  app.add_option("--weight-decay", f.weight_decay, "L2 weight decay")->check(CLI::Range(0.0, 1e3));
  app.add_option("--optimizer", f.optimizer, "sgd or adam")->check(CLI::IsMember({"sgd", "adam"}));
  app.add_option("--strategy", f.strategy,
                 "how workers combine gradients: allreduce; ps (a server rank, the last, applies "
                 "the averaged gradients once every worker has pushed: -np workers+1); ps-async "
                 "(it applies each push on arrival); kvstore (each worker serves a shard)")
      ->check(CLI::IsMember({"allreduce", "ps", "ps-async", "kvstore"}));
  app.add_option("--device", f.device,
                 "cpu, cuda (GPU local_rank % devices) or cuda:N; cuda needs a CUDA build and "
                 "a usable device");
  app.add_option("--data-dir", f.data_dir,
                 "Fashion-MNIST IDX files (default: HOOP_DATA_DIR "
                 "or /usr/share/datasets/fashion-mnist)");
  app.add_option("--seed", f.seed, "seed of the initial weights and the shuffles");
  app.add_option("--backward-passes-per-step", f.backward_passes,
                 "micro-batches whose gradients are summed before one allreduce and update")
      ->check(positive);
  app.add_flag("--fp16-allreduce", f.fp16, "average gradients in float16");
  app.add_option("--baseline-throughput", f.baseline_throughput,
                 "samples/s of one worker, for speedup_n (0: measured with --baseline-steps)");
  app.add_option("--baseline-steps", f.baseline_steps,
                 "steps rank 0 trains alone to measure throughput_1 (0: off)")
      ->check(non_negative);
  app.add_option("--max-steps", f.max_steps,
                 "cap on micro-batches per epoch, for tests (-1: none)");
  app.add_option("--save-params", f.save_params, "rank 0 writes the final parameters here");
  app.add_option("--threads", f.threads,
                 "threads for matrix products per rank (LeNet-5's products are too small to "
                 "gain from more than one)")
      ->check(positive);
  app.add_flag("--elastic", f.elastic,
               "survive lost and added workers (hooprun --host-discovery-script): the state is "
               "committed every --commit-every updates and at each epoch's start; CPU only");
  app.add_option("--commit-every", f.commit_every, "elastic: updates between commits")
      ->check(positive);
  app.add_option("--progress", f.progress, "progress bar: auto or off")
      ->check(CLI::IsMember({"auto", "off"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;  // a usage error, as every hoop program exits on one
  }
  try {
    return run(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_fashion_mnist: %s\n", e.what());
    return 1;
  }
}
