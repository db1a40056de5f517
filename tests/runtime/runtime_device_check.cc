// One rank of a runtime test on CUDA device tensors: hooprun launches it, runtime_device_test
// checks what it prints. `runtime_device_check SCENARIO`; a scenario prints "ok <scenario>"
// and exits 0, or prints what was wrong and exits 1.
//   refused:     device tensors this process cannot have (no device, or host memory that says
//                it is on a device) are refused at submission, naming the tensor and why;
//   collectives: every collective of the runtime on device tensors (fused and lone allreduces
//                with prescale, postscale and avg, grouped, broadcast, allgather, alltoall,
//                reducescatter) gives the result of the same calls on host tensors. Values
//                are small integers, exact in any summation order, so results compare bit for
//                bit whichever GPU backend reduces them.
#include <fmt/format.h>

#include <cstring>
#include <string>
#include <vector>

#include "device/device.h"
#include "hoop/hoop.h"

namespace {

using hoop::DataType;
using hoop::ReduceOp;
using hoop::Tensor;

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  fmt::print("rank {}: FAILED {}\n", hoop::is_initialized() ? hoop::rank() : -1, what);
  std::fflush(stdout);
}

void check(const hoop::Status& s) {
  if (!s.ok()) throw hoop::Error(s);
}

/// A host tensor and its copy on this rank's device.
struct Pair {
  std::vector<float> host;
  hoop::device::Buffer dev;
  std::vector<std::int64_t> shape;
  int device;

  Pair(std::vector<std::int64_t> s, int d, float seed) : shape(std::move(s)), device(d) {
    std::size_t n = 1;
    for (auto x : shape) n *= static_cast<std::size_t>(x);
    host.resize(n);
    for (std::size_t i = 0; i < n; ++i)
      host[i] = static_cast<float>((static_cast<std::size_t>(seed) * 7 + i * 3) % 17) - 8;
    dev = hoop::device::Buffer::allocate(d, n * sizeof(float)).value();
    check(hoop::device::copy(dev.data(), host.data(), n * sizeof(float)));
  }
  Tensor on_host() { return Tensor{host.data(), DataType::kF32, shape, hoop::kCpuDevice}; }
  Tensor on_device() { return Tensor{dev.data(), DataType::kF32, shape, device}; }
  /// Whether the device copy equals the host one bit for bit.
  bool same() const {
    std::vector<float> back(host.size());
    check(hoop::device::copy(back.data(), dev.data(), back.size() * sizeof(float)));
    return std::memcmp(back.data(), host.data(), back.size() * sizeof(float)) == 0;
  }
};

/// Whether a device result equals a host result bit for bit.
bool same_output(hoop::OwnedTensor& dev, hoop::OwnedTensor& host) {
  if (dev.device == hoop::kCpuDevice || dev.shape != host.shape) return false;
  std::vector<std::byte> back(host.storage.size());
  check(hoop::device::copy(back.data(), dev.data(), back.size()));
  return back == host.storage;
}

int refused() {
  hoop::init();
  std::vector<float> host(16, 1.0f);
  const Tensor t{host.data(), DataType::kF32, {16}, 0};
  try {
    hoop::allreduce("host_says_cuda", t, t);
    expect(false, "a host buffer declared as cuda:0 must be refused");
  } catch (const hoop::Error& e) {
    const std::string m = e.status().to_string();
    const std::string why = hoop::device::device_count() == 0
                                ? "can use 0 CUDA device(s)"
                                : "says cuda:0, but its data is in host memory";
    expect(
        m.find("tensor 'host_says_cuda'") != std::string::npos && m.find(why) != std::string::npos,
        "the refusal names the tensor and why: " + m);
    fmt::print("rank {}: refused: {}\n", hoop::rank(), m);
  }
  // The runtime goes on: nothing was queued.
  hoop::allreduce("after", Tensor{host.data(), DataType::kF32, {16}},
                  Tensor{host.data(), DataType::kF32, {16}});
  hoop::shutdown();
  return 0;
}

int collectives() {
  hoop::init();
  const int me = hoop::rank();
  const int n = hoop::size();
  const int device = hoop::local_rank() % hoop::device::device_count();
  // Fused: many small tensors in one response; lone: one large one. Both with scales and avg.
  std::vector<Pair> small;
  for (int t = 0; t < 24; ++t) small.emplace_back(std::vector<std::int64_t>{t + 1}, device, me + t);
  Pair large({1 << 16}, device, me + 100.0f);
  hoop::ReduceOptions scaled;
  scaled.op = ReduceOp::kSum;
  scaled.prescale = 2.0;
  scaled.postscale = 0.5;
  for (const char* where : {"host", "device"}) {
    const bool dev = std::string(where) == "device";
    std::vector<hoop::Handle> hs;
    for (std::size_t t = 0; t < small.size(); ++t) {
      const Tensor x = dev ? small[t].on_device() : small[t].on_host();
      hs.push_back(hoop::allreduce_async(fmt::format("{}/s{}", where, t), x, x, scaled));
    }
    const Tensor l = dev ? large.on_device() : large.on_host();
    hs.push_back(hoop::allreduce_async(fmt::format("{}/large", where), l, l));  // avg
    for (auto& h : hs) h.wait();
  }
  for (std::size_t t = 0; t < small.size(); ++t)
    expect(small[t].same(), fmt::format("fused allreduce tensor {}", t));
  expect(large.same(), "lone averaged allreduce");

  Pair ga({3, 2}, device, me + 1.0f), gb({3, 2}, device, me + 5.0f);
  hoop::grouped_allreduce({"g/a", "g/b"}, {ga.on_host(), gb.on_host()},
                          {ga.on_host(), gb.on_host()});
  hoop::grouped_allreduce({"gd/a", "gd/b"}, {ga.on_device(), gb.on_device()},
                          {ga.on_device(), gb.on_device()});
  expect(ga.same() && gb.same(), "grouped allreduce");

  // An integer tensor: its scales are 1, which the device path must not try to apply. The
  // floats' bit patterns summed as int32 wrap around alike on host and device.
  Pair ints({257}, device, me + 3.0f);
  hoop::ReduceOptions int_sum;
  int_sum.op = ReduceOp::kSum;
  hoop::allreduce("i/host", Tensor{ints.host.data(), DataType::kI32, ints.shape, hoop::kCpuDevice},
                  Tensor{ints.host.data(), DataType::kI32, ints.shape, hoop::kCpuDevice}, int_sum);
  hoop::allreduce("i/device", Tensor{ints.dev.data(), DataType::kI32, ints.shape, device},
                  Tensor{ints.dev.data(), DataType::kI32, ints.shape, device}, int_sum);
  expect(ints.same(), "int32 allreduce");

  Pair b({33}, device, me + 9.0f);
  hoop::broadcast("b/host", b.on_host(), n - 1);
  hoop::broadcast("b/device", b.on_device(), n - 1);
  expect(b.same(), "broadcast from the last rank");

  Pair g({me + 1, 3}, device, me + 2.0f);  // uneven first dimensions
  hoop::OwnedTensor gh = hoop::allgather("ag/host", g.on_host());
  hoop::OwnedTensor gd = hoop::allgather("ag/device", g.on_device());
  expect(same_output(gd, gh), "allgather with uneven rows lands on the device");

  Pair a({2 * n, 2}, device, me + 3.0f);
  std::vector<std::int64_t> splits(static_cast<std::size_t>(n), 2);
  hoop::Handle ah = hoop::alltoall_async("a2a/host", a.on_host(), splits);
  hoop::Handle ad = hoop::alltoall_async("a2a/device", a.on_device(), splits);
  ah.wait();
  ad.wait();
  expect(same_output(ad.output(), ah.output()), "alltoall");
  expect(ad.received_splits() == ah.received_splits(), "alltoall received splits");

  Pair r({2 * n + 1, 2}, device, me + 4.0f);  // uneven rows
  hoop::ReduceOptions sum;
  sum.op = ReduceOp::kSum;
  hoop::OwnedTensor rh = hoop::reducescatter("rs/host", r.on_host(), sum);
  hoop::OwnedTensor rd = hoop::reducescatter("rs/device", r.on_device(), sum);
  expect(same_output(rd, rh), "reducescatter");
  hoop::shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "";
  int rc = 2;
  try {
    if (name == "refused") rc = refused();
    if (name == "collectives") rc = collectives();
  } catch (const hoop::Error& e) {
    fmt::print("rank {}: error: {}\n", hoop::is_initialized() ? hoop::rank() : -1,
               e.status().to_string());
    return 1;
  }
  if (rc == 2) fmt::print("unknown scenario '{}'\n", name);
  if (rc != 0 || failures > 0) return rc != 0 ? rc : 1;
  fmt::print("ok {}\n", name);
  return 0;
}
