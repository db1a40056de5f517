// The runtime_check scenario "threads": application threads that wait run the negotiation and
// the collectives themselves (the handle's driver), so several of them contend for one process
// set, and work that nobody waits for must still go out through the background thread.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "hoop/hoop.h"

namespace hoop::runtime_check {

int threads_scenario() {
  hoop::init();
  const int me = hoop::rank();
  const int n = hoop::size();
  std::atomic<int> wrong{0};
  hoop::ReduceOptions sum;
  sum.op = hoop::ReduceOp::kSum;

  // Four threads per rank, each with tensors of its own, waiting at once: they take turns
  // driving the set, and every result must still be right.
  constexpr int kThreads = 4;
  constexpr int kCalls = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> x(3 + t);
      for (int i = 0; i < kCalls; ++i) {
        for (std::size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(me + i + k);
        const hoop::Tensor tensor{
            x.data(), hoop::DataType::kF32, {static_cast<std::int64_t>(x.size())}, kCpuDevice};
        hoop::allreduce(fmt::format("thread{}", t), tensor, tensor, sum);
        for (std::size_t k = 0; k < x.size(); ++k) {
          const float want = static_cast<float>(n * (n - 1) / 2 + n * (i + static_cast<int>(k)));
          if (x[k] != want) wrong.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();

  // Nobody waits: the handle is only polled, so the background thread must send the tensor,
  // run the response and finish the handle on its own.
  std::vector<float> y(5, static_cast<float>(me + 1));
  const hoop::Tensor ty{y.data(), hoop::DataType::kF32, {5}, kCpuDevice};
  hoop::Handle h = hoop::allreduce_async("polled", ty, ty, sum);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!h.poll() && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  if (!h.poll()) {
    fmt::print("rank {}: FAILED the polled handle did not finish without a wait\n", me);
    return 1;
  }
  h.wait();
  for (float v : y)
    if (v != static_cast<float>(n * (n + 1) / 2)) wrong.fetch_add(1);

  // Skewed ranks: the waiting thread gives up driving after its spin and sleeps; the
  // background thread takes over when the late rank's request arrives.
  for (int i = 0; i < 5; ++i) {
    if (me == i % n) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    float z = 1.0f;
    const hoop::Tensor tz{&z, hoop::DataType::kF32, {1}, kCpuDevice};
    hoop::allreduce("skewed", tz, tz, sum);
    if (z != static_cast<float>(n)) wrong.fetch_add(1);
  }
  hoop::shutdown();
  if (wrong.load() != 0) {
    fmt::print("rank {}: FAILED {} wrong values\n", me, wrong.load());
    return 1;
  }
  return 0;
}

}  // namespace hoop::runtime_check
