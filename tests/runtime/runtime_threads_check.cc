// The runtime_check scenario "threads": application threads that wait run the negotiation and
// the collectives themselves (the handle's driver), so several of them contend for one process
// set, and work that nobody waits for must still go out through the background thread, and
// completes by callback (Handle::on_done) where asked.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
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

  // Completion by callback, as TensorFlow's kernels take it: a burst of handles nobody waits
  // for, each finishing on the background thread, the allgather's output already in place.
  constexpr int kBurst = 16;
  std::mutex mu;
  std::condition_variable cv;
  int called = 0;
  std::vector<std::vector<float>> zs(kBurst, std::vector<float>(3, 1.0f));
  std::vector<hoop::Handle> burst;
  for (int i = 0; i < kBurst; ++i) {
    const hoop::Tensor tz{zs[i].data(), hoop::DataType::kF32, {3}, kCpuDevice};
    burst.push_back(i % 2 == 0 ? hoop::allreduce_async(fmt::format("cb{}", i), tz, tz, sum)
                               : hoop::allgather_async(fmt::format("cb{}", i), tz));
  }
  for (int i = 0; i < kBurst; ++i) {
    const hoop::Handle b = burst[i];
    b.on_done([&, b, i](const hoop::Status& s) {
      const bool gathered = i % 2 == 1;
      if (!s.ok() || (gathered && b.output().shape != std::vector<std::int64_t>{3 * n}))
        wrong.fetch_add(1);
      if (!gathered && zs[i][0] != static_cast<float>(n)) wrong.fetch_add(1);
      std::lock_guard<std::mutex> lock(mu);
      ++called;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(30), [&] { return called == kBurst; })) {
      fmt::print("rank {}: FAILED {} of {} callbacks ran\n", me, called, kBurst);
      return 1;
    }
  }
  // A finished handle calls back at once, on this thread.
  bool at_once = false;
  burst[0].on_done([&](const hoop::Status& s) { at_once = s.ok(); });
  if (!at_once) wrong.fetch_add(1);

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
