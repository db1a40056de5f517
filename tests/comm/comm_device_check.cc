// A rank that checks the Communicator's collectives on CUDA device buffers: every collective,
// every dtype and op, in-place and out-of-place, on counts 0, 1, 7, 1031 and 2^20 + 3. Each case
// runs twice on the same seeded inputs, once on host buffers and once on device buffers of this
// rank's device (HOOP_LOCAL_RANK modulo the device count), and the results must agree: bit for
// bit under HOOP_GPU_BACKEND=hoop and staging (hoop's algorithms in the host's order, and device
// kernels that round as the host's do), within the float tolerance of comm_reference.h where
// NCCL may run, which sums in its own order. Prints "device checked N cases on cuda:D" and exits 0,
// or prints each FAIL and exits 1; exits 0 with "device skipped: <reason>" on a machine without a
// usable device. With arguments `mismatch FIELD` it checks instead that a device call whose
// ranks disagree fails on every rank (check_mismatch).
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "device/device.h"
#include "hoop/communicator.h"
#include "tests/comm/comm_reference.h"

namespace hoop {
namespace {

using Bytes = std::vector<std::byte>;

struct Checker {
  Communicator& comm;
  int device;
  bool exact;
  int cases = 0;
  int failures = 0;

  void fail(const std::string& what) {
    ++failures;
    if (failures <= 20) fmt::print("FAIL rank {}: {}\n", comm.rank(), what);
  }

  /// Compares `got` (from the device) with `want` (from the host) as `dt` elements.
  void compare(const std::string& what, DataType dt, const Bytes& want, const Bytes& got) {
    ++cases;
    if (want.size() != got.size()) return fail(what + ": sizes differ");
    if (exact || !dtype_is_float(dt)) {
      if (!want.empty() && std::memcmp(want.data(), got.data(), want.size()) != 0)
        fail(what + ": bytes differ");
      return;
    }
    const std::size_t es = dtype_size(dt);
    const double tol = comm_check::tolerance(dt, comm.size());
    for (std::size_t i = 0; i < want.size() / es; ++i) {
      const double w = comm_check::as_double(dt, want.data() + i * es);
      const double g = comm_check::as_double(dt, got.data() + i * es);
      if (std::fabs(w - g) > tol * std::max(1.0, std::fabs(w)))
        return fail(fmt::format("{}: element {} is {} on the device, {} on the host", what, i, g,
                                w));
    }
  }

  /// Runs `call(in, out)` on host copies and on device copies of `in` (and of `out`'s initial
  /// contents) and compares the outputs. `in_place` passes the output as the input.
  void run(const std::string& what, DataType dt, const Bytes& in, std::size_t out_bytes,
           bool in_place, const std::function<Status(const void*, void*)>& call) {
    Bytes host_out(out_bytes);
    if (in_place && !in.empty())
      std::memcpy(host_out.data(), in.data(), std::min(in.size(), out_bytes));
    Status s = call(in_place ? nullptr : in.data(), host_out.data());
    if (!s.ok()) return fail(what + " on the host: " + s.to_string());
    Result<device::Buffer> din = device::Buffer::allocate(device, in.size());
    Result<device::Buffer> dout = device::Buffer::allocate(device, out_bytes);
    if (!din.ok() || !dout.ok()) return fail(what + ": cudaMalloc failed");
    if (!device::copy(din->data(), in.data(), in.size()).ok())
      return fail(what + ": copy to the device failed");
    if (in_place && !device::copy(dout->data(), in.data(), std::min(in.size(), out_bytes)).ok())
      return fail(what + ": copy to the device failed");
    s = call(in_place ? nullptr : din->data(), dout->data());
    if (!s.ok()) return fail(what + " on the device: " + s.to_string());
    Bytes got(out_bytes);
    if (!device::copy(got.data(), dout->data(), out_bytes).ok())
      return fail(what + ": copy from the device failed");
    compare(what, dt, host_out, got);
  }
};

void check_all(Checker& c) {
  const int n = c.comm.size();
  const std::size_t counts[] = {0, 1, 7, 1031, (std::size_t{1} << 20) + 3};
  std::uint64_t id = 0;
  for (DataType dt : kAllDataTypes) {
    const std::size_t es = dtype_size(dt);
    for (std::size_t count : counts) {
      // Large counts with every op would take minutes; sum is enough there.
      for (ReduceOp op : kAllReduceOps) {
        if (count > 2000 && op != ReduceOp::kSum) continue;
        for (bool in_place : {false, true}) {
          const std::string tag = fmt::format("{} {} x{}{}", dtype_name(dt), op_name(op), count,
                                              in_place ? " in place" : "");
          Bytes in(count * es);
          comm_check::gen(++id, c.comm.rank(), dt, count, in.data());
          c.run("allreduce " + tag, dt, in, in.size(), in_place, [&](const void* i, void* o) {
            return allreduce(c.comm, AllreduceOptions{i, o, count, dt, op});
          });
          Bytes all(count * es * n);
          comm_check::gen(++id, c.comm.rank(), dt, count * n, all.data());
          c.run("reduce_scatter " + tag, dt, all, in_place ? all.size() : count * es, in_place,
                [&](const void* i, void* o) {
                  return reduce_scatter(c.comm, ReduceScatterOptions{i, o, count, dt, op});
                });
        }
      }
      if (dt == DataType::kF32 && count > 1000) {
        // Adasum combines whole vectors (dot products): it has no device kernels and goes
        // through host copies in one piece (at 4 MiB, more than one staging chunk), so its bits
        // are the host's. One dtype: what is checked is the staging, not Adasum's arithmetic.
        for (bool in_place : {false, true}) {
          Bytes in(count * es);
          comm_check::gen(++id, c.comm.rank(), dt, count, in.data());
          c.run(fmt::format("allreduce {} adasum x{}{}", dtype_name(dt), count,
                            in_place ? " in place" : ""),
                dt, in, in.size(), in_place, [&](const void* i, void* o) {
                  return allreduce(c.comm, AllreduceOptions{i, o, count, dt, ReduceOp::kAdasum});
                });
        }
      }
      const std::string tag = fmt::format("{} x{}", dtype_name(dt), count);
      Bytes in(count * es);
      comm_check::gen(++id, c.comm.rank(), dt, count, in.data());
      c.run("broadcast " + tag, dt, in, in.size(), true, [&](const void*, void* o) {
        return broadcast(c.comm, BroadcastOptions{o, count, dt, n - 1});
      });
      c.run("allgather " + tag, dt, in, in.size() * n, false, [&](const void* i, void* o) {
        return allgather(c.comm, AllgatherOptions{i, o, count, dt});
      });
      Bytes all(count * es * n);
      comm_check::gen(++id, c.comm.rank(), dt, count * n, all.data());
      c.run("alltoall " + tag, dt, all, all.size(), false, [&](const void* i, void* o) {
        return alltoall(c.comm, AlltoallOptions{i, o, count, dt});
      });
      // Rank r contributes count + r elements: the v-variants with unequal blocks.
      std::vector<std::size_t> counts_v(n);
      std::size_t total = 0;
      for (int r = 0; r < n; ++r) total += counts_v[r] = count + r;
      Bytes mine(counts_v[c.comm.rank()] * es);
      comm_check::gen(++id, c.comm.rank(), dt, counts_v[c.comm.rank()], mine.data());
      c.run("allgatherv " + tag, dt, mine, total * es, false, [&](const void* i, void* o) {
        return allgatherv(c.comm, AllgathervOptions{i, o, counts_v, dt});
      });
    }
  }
}

/// `comm_device_check mismatch FIELD`: one allreduce of 1031 elements on device buffers in
/// which rank 1 differs from the others in FIELD (op: max against sum; dtype: i32 against f32
/// of the same bytes; buffers: host memory against device memory). Every rank must fail,
/// naming the field: prints "rank R: mismatch: <error>" and exits 0, or a FAIL and exits 1.
int check_mismatch(Communicator& comm, int dev, const std::string& field) {
  constexpr std::size_t kCount = 1031;
  const bool odd = comm.rank() == 1;
  AllreduceOptions o;
  o.count = kCount;
  o.dtype = odd && field == "dtype" ? DataType::kI32 : DataType::kF32;
  o.op = odd && field == "op" ? ReduceOp::kMax : ReduceOp::kSum;
  Bytes host(kCount * 4, std::byte{0});
  Result<device::Buffer> buf = device::Buffer::allocate(dev, host.size());
  if (!buf.ok()) {
    fmt::print("FAIL rank {}: cannot allocate device memory\n", comm.rank());
    return 1;
  }
  if (!device::copy(buf->data(), host.data(), host.size()).ok()) {
    fmt::print("FAIL rank {}: copy to the device failed\n", comm.rank());
    return 1;
  }
  o.input = o.output = odd && field == "buffers" ? static_cast<void*>(host.data()) : buf->data();
  const Status s = allreduce(comm, o);
  if (s.ok()) {
    fmt::print("FAIL rank {}: the mismatched allreduce ({}) succeeded\n", comm.rank(), field);
    return 1;
  }
  fmt::print("rank {}: mismatch: {}\n", comm.rank(), s.to_string());
  return 0;
}

}  // namespace
}  // namespace hoop

int main(int argc, char** argv) {
  using namespace hoop;
  const int devices = device::device_count();
  if (devices == 0) {
    fmt::print("device skipped: {}\n", device::unavailable_reason());
    return 0;
  }
  const char* local = std::getenv("HOOP_LOCAL_RANK");
  const int dev = (local != nullptr ? std::atoi(local) : 0) % devices;
  if (!device::set_device(dev).ok()) {
    fmt::print("FAIL: cannot use cuda:{}\n", dev);
    return 1;
  }
  auto comm = Communicator::create();
  if (!comm.ok()) {
    fmt::print("FAIL create: {}\n", comm.status().to_string());
    return 1;
  }
  if (argc == 3 && std::string(argv[1]) == "mismatch") return check_mismatch(**comm, dev, argv[2]);
  // Bit for bit wherever hoop's own algorithms run (hoop, staging, and auto on the fake device,
  // which has no NCCL); within tolerance where NCCL may sum in its own order.
  const char* asked = std::getenv("HOOP_GPU_BACKEND");
  const std::string backend = asked != nullptr ? asked : "";
  const bool exact = backend == "hoop" || backend == "staging" || device::fake();
  Checker c{**comm, dev, exact};
  check_all(c);
  if (c.failures > 0) {
    fmt::print("FAIL rank {}: {} of {} device cases differ\n", c.comm.rank(), c.failures, c.cases);
    return 1;
  }
  fmt::print("device checked {} cases on cuda:{}\n", c.cases, dev);
  return 0;
}
