// One rank of a runtime test: hooprun launches it, runtime_hooprun_test checks what it prints
// and how it exits. `runtime_check SCENARIO`; every scenario prints "ok <scenario>" at the end
// and exits 0, or prints what was wrong and exits 1.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/half.h"
#include "hoop/communicator.h"
#include "hoop/hoop.h"
#include "tests/comm/comm_reference.h"

namespace hoop::runtime_check {
/// runtime_threads_check.cc
int threads_scenario();
/// runtime_carried_check.cc
int carried_scenario();
}  // namespace hoop::runtime_check

namespace {

using hoop::DataType;
using hoop::ReduceOp;
using hoop::Tensor;

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    fmt::print("rank {}: FAILED {}\n", hoop::is_initialized() ? hoop::rank() : -1, what);
    std::fflush(stdout);
  }
}

/// Fills `count` elements of `dtype` at `p` from doubles.
void fill(void* p, DataType dtype, std::size_t count, const std::function<double(std::size_t)>& f);
/// Element i of a buffer as a double.
double get(const void* p, DataType dtype, std::size_t i);

struct Buf {
  DataType dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;
  Buf(DataType d, std::vector<std::int64_t> s) : dtype(d), shape(std::move(s)) {
    std::size_t n = 1;
    for (auto x : shape) n *= static_cast<std::size_t>(x);
    bytes.resize(n * hoop::dtype_size(d) + 1);
  }
  std::size_t count() const { return (bytes.size() - 1) / hoop::dtype_size(dtype); }
  Tensor tensor() { return Tensor{bytes.data(), dtype, shape, hoop::kCpuDevice}; }
};

/// Submits `tensors` tensors of mixed dtypes and sizes in a rank-dependent order, waits, and
/// checks each against the float64 (exact for integers) reference of comm_reference.h.
void mixed_step(int tensors, int step, ReduceOp op) {
  const int me = hoop::rank();
  const int n = hoop::size();
  const DataType dtypes[] = {DataType::kF32, DataType::kF64,  DataType::kI32, DataType::kI64,
                             DataType::kF16, DataType::kBF16, DataType::kU8,  DataType::kI8};
  std::vector<Buf> in;
  std::vector<Buf> out;
  auto id = [&](int t) { return static_cast<std::uint64_t>(step) * 100003 + t; };
  for (int t = 0; t < tensors; ++t) {
    const DataType d = dtypes[t % 8];
    const std::int64_t len = (t * 37) % 300 + (t % 50 == 0 ? 5003 : 0);
    in.emplace_back(d, std::vector<std::int64_t>{len});
    out.emplace_back(d, std::vector<std::int64_t>{len});
    hoop::comm_check::gen(id(t), me, d, in.back().count(), in.back().bytes.data());
  }
  std::vector<int> order(static_cast<std::size_t>(tensors));
  for (int t = 0; t < tensors; ++t) order[t] = t;
  std::mt19937 rng(static_cast<unsigned>(me * 1000 + step));
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<hoop::Handle> handles(static_cast<std::size_t>(tensors));
  hoop::ReduceOptions o;
  o.op = op;
  for (int t : order)
    handles[t] =
        hoop::allreduce_async(fmt::format("mixed.{}", t), in[t].tensor(), out[t].tensor(), o);
  for (int t = 0; t < tensors; ++t) {
    handles[t].wait();
    const DataType d = out[t].dtype;
    const std::size_t es = hoop::dtype_size(d);
    std::vector<std::vector<std::byte>> all(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      all[r].resize(out[t].count() * es);
      hoop::comm_check::gen(id(t), r, d, out[t].count(), all[r].data());
    }
    for (std::size_t i = 0; i < out[t].count(); ++i) {
      std::byte exact[8] = {};
      double approx = 0;
      hoop::comm_check::reference(d, op, n, all, i, exact, &approx);
      const std::byte* got = out[t].bytes.data() + i * es;
      const bool ok = hoop::dtype_is_float(d)
                          ? std::fabs(hoop::comm_check::as_double(d, got) - approx) <=
                                hoop::comm_check::tolerance(d, n) * std::max(1.0, std::fabs(approx))
                          : std::memcmp(got, exact, es) == 0;
      if (!ok) {
        expect(false, fmt::format("step {} tensor {} ({}, {}) element {}: got {} want {}", step, t,
                                  hoop::dtype_name(d), hoop::op_name(op), i,
                                  hoop::comm_check::as_double(d, got), approx));
        break;
      }
    }
  }
}

int scenario(const std::string& name, const std::vector<std::string>& args);

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: runtime_check SCENARIO [ARGS...]\n");
    return 2;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    const int rc = scenario(argv[1], args);
    if (rc != 0 || failures > 0) return 1;
    fmt::print("ok {}\n", argv[1]);
    return 0;
  } catch (const hoop::Error& e) {
    fmt::print("rank {}: error: {}\n", hoop::is_initialized() ? hoop::rank() : -1,
               e.status().to_string());
    return 3;
  }
}

namespace {

void fill(void* p, DataType dtype, std::size_t count,
          const std::function<double(std::size_t)>& gen) {
  const std::size_t es = hoop::dtype_size(dtype);
  for (std::size_t i = 0; i < count; ++i) {
    const double v = gen(i);
    std::byte* at = static_cast<std::byte*>(p) + i * es;
    auto put = [&](auto x) { std::memcpy(at, &x, sizeof(x)); };
    switch (dtype) {
      case DataType::kU8:
        put(static_cast<std::uint8_t>(v));
        break;
      case DataType::kI8:
        put(static_cast<std::int8_t>(v));
        break;
      case DataType::kI16:
        put(static_cast<std::int16_t>(v));
        break;
      case DataType::kI32:
        put(static_cast<std::int32_t>(v));
        break;
      case DataType::kI64:
        put(static_cast<std::int64_t>(v));
        break;
      case DataType::kF16:
        put(hoop::float_to_half(static_cast<float>(v)));
        break;
      case DataType::kBF16:
        put(hoop::float_to_bf16(static_cast<float>(v)));
        break;
      case DataType::kF32:
        put(static_cast<float>(v));
        break;
      case DataType::kF64:
        put(v);
        break;
    }
  }
}

double get(const void* p, DataType dtype, std::size_t i) {
  return hoop::comm_check::as_double(
      dtype, static_cast<const std::byte*>(p) + i * hoop::dtype_size(dtype));
}

std::vector<double> values_of(const void* p, DataType dtype, std::size_t count) {
  std::vector<double> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back(get(p, dtype, i));
  return out;
}

int collectives_scenario() {
  hoop::init();
  const int me = hoop::rank();
  const int n = hoop::size();
  // Allgather with a different first dimension per rank: rank r sends r + 1 rows of 3.
  Buf g(DataType::kI32, {me + 1, 3});
  fill(g.bytes.data(), g.dtype, g.count(), [&](std::size_t i) { return me * 100 + i; });
  hoop::OwnedTensor all = hoop::allgather("gather", g.tensor());
  std::vector<double> want;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < (r + 1) * 3; ++i) want.push_back(r * 100 + i);
  expect(all.shape == std::vector<std::int64_t>({n * (n + 1) / 2, 3}), "allgather shape");
  expect(values_of(all.storage.data(), all.dtype, want.size()) == want, "allgather values");
  // Broadcast from the last rank.
  Buf b(DataType::kF64, {5});
  fill(b.bytes.data(), b.dtype, 5, [&](std::size_t i) { return me * 10.0 + i; });
  hoop::broadcast("bcast", b.tensor(), n - 1);
  expect(values_of(b.bytes.data(), b.dtype, 5) ==
             std::vector<double>{(n - 1) * 10.0, (n - 1) * 10.0 + 1, (n - 1) * 10.0 + 2,
                                 (n - 1) * 10.0 + 3, (n - 1) * 10.0 + 4},
         "broadcast values");
  // Alltoall with uneven splits: rank r sends j + 1 rows of 2 to rank j.
  std::vector<std::int64_t> splits;
  std::int64_t rows = 0;
  for (int j = 0; j < n; ++j) {
    splits.push_back(j + 1);
    rows += j + 1;
  }
  Buf a(DataType::kF32, {rows, 2});
  fill(a.bytes.data(), a.dtype, a.count(), [&](std::size_t i) { return me * 1000 + i; });
  hoop::Handle h = hoop::alltoall_async("a2a", a.tensor(), splits);
  h.wait();
  expect(h.received_splits() == std::vector<std::int64_t>(static_cast<std::size_t>(n), me + 1),
         "alltoall received splits");
  std::vector<double> got =
      values_of(h.output().storage.data(), DataType::kF32, h.output().storage.size() / 4);
  std::vector<double> expect_a2a;
  std::int64_t my_offset = 0;
  for (int j = 0; j < me; ++j) my_offset += j + 1;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < (me + 1) * 2; ++i) expect_a2a.push_back(r * 1000 + my_offset * 2 + i);
  expect(got == expect_a2a, "alltoall values");
  // Reducescatter of 2n + 1 rows of 2: the first rank gets one row more.
  Buf rs(DataType::kF32, {2 * n + 1, 2});
  fill(rs.bytes.data(), rs.dtype, rs.count(),
       [&](std::size_t i) { return static_cast<double>(i % 7); });
  hoop::ReduceOptions sum;
  sum.op = ReduceOp::kSum;
  sum.postscale = 0.5;
  hoop::OwnedTensor part = hoop::reducescatter("rs", rs.tensor(), sum);
  const std::int64_t my_rows = 2 + (me == 0 ? 1 : 0);
  expect(part.shape == std::vector<std::int64_t>({my_rows, 2}), "reducescatter shape");
  const std::int64_t first_row = me == 0 ? 0 : 3 + (me - 1) * 2;
  for (std::int64_t i = 0; i < my_rows * 2; ++i)
    expect(get(part.storage.data(), DataType::kF32, static_cast<std::size_t>(i)) ==
               ((first_row * 2 + i) % 7) * n * 0.5,
           fmt::format("reducescatter element {}", i));
  // Grouped allreduce with prescale.
  Buf x(DataType::kF32, {3});
  Buf y(DataType::kF64, {2});
  fill(x.bytes.data(), x.dtype, 3, [&](std::size_t) { return 2.0; });
  fill(y.bytes.data(), y.dtype, 2, [&](std::size_t) { return 4.0; });
  hoop::ReduceOptions scaled;
  scaled.op = ReduceOp::kSum;
  scaled.prescale = 0.5;
  hoop::grouped_allreduce_async({"gx", "gy"}, {x.tensor(), y.tensor()}, {x.tensor(), y.tensor()},
                                scaled)
      .wait();
  expect(get(x.bytes.data(), x.dtype, 2) == n * 1.0 && get(y.bytes.data(), y.dtype, 1) == n * 2.0,
         "grouped allreduce with prescale");
  hoop::barrier();
  hoop::barrier();
  hoop::shutdown();
  return 0;
}

int mismatch_scenario(const std::string& kind) {
  hoop::init();
  const int me = hoop::rank();
  Buf a(DataType::kF32, {4, me == 1 && kind == "shape" ? 5 : 4});
  Buf d(me == 1 && kind == "dtype" ? DataType::kF64 : DataType::kF32, {4, 4});
  hoop::Status s;
  if (kind == "root") {
    s = hoop::broadcast_async("t", a.tensor(), me == 1 ? 1 : 0).status();
  } else if (kind == "op" || kind == "scale") {
    hoop::ReduceOptions o;
    if (kind == "op") o.op = me == 1 ? ReduceOp::kMax : ReduceOp::kSum;
    if (kind == "scale") o.prescale = me == 1 ? 2.0 : 1.0;
    s = hoop::allreduce_async("t", a.tensor(), a.tensor(), o).status();
  } else if (kind == "dtype") {
    s = hoop::allreduce_async("t", d.tensor(), d.tensor()).status();
  } else if (kind == "operation") {
    s = me == 1 ? hoop::broadcast_async("t", a.tensor(), 0).status()
                : hoop::allreduce_async("t", a.tensor(), a.tensor()).status();
  } else {
    s = hoop::allreduce_async("t", a.tensor(), a.tensor()).status();
  }
  fmt::print("rank {}: mismatch: {}\n", me, s.to_string());
  expect(s.code() == hoop::StatusCode::kMismatch, "a mismatch error");
  // The job goes on: the next tensor runs normally.
  Buf ok(DataType::kF32, {4});
  hoop::allreduce("after", ok.tensor(), ok.tensor());
  hoop::shutdown();
  return 0;
}

int join_scenario() {
  hoop::init();
  const int me = hoop::rank();
  const int n = hoop::size();
  // Rank r runs r + 2 steps, then joins; a joined rank contributes zeros and the average is
  // over all n ranks, as in Horovod.
  for (int step = 0; step < me + 2; ++step) {
    Buf a(DataType::kF32, {3});
    fill(a.bytes.data(), a.dtype, 3, [&](std::size_t) { return static_cast<double>(me); });
    hoop::ReduceOptions o;
    o.op = ReduceOp::kAvg;
    hoop::allreduce(fmt::format("step{}", step), a.tensor(), a.tensor(), o);
    double sum = 0;
    int active = 0;
    for (int r = 0; r < n; ++r) {
      if (step < r + 2) {
        sum += r;
        ++active;
      }
    }
    expect(get(a.bytes.data(), a.dtype, 0) == static_cast<float>(sum / n),
           fmt::format("step {}: {} ranks active, the average over all {}", step, active, n));
    // Two tensors fused past the size where one host's ranks read them where they lie
    // (allreduce_list): a joined rank's zeros stand in for both.
    hoop::ReduceOptions summed;
    summed.op = ReduceOp::kSum;
    Buf x(DataType::kF32, {40009});
    Buf y(DataType::kF32, {40013});
    fill(x.bytes.data(), x.dtype, x.count(), [&](std::size_t i) { return me + 1.0 + i % 7; });
    fill(y.bytes.data(), y.dtype, y.count(), [&](std::size_t) { return 2.0 * (me + 1); });
    hoop::grouped_allreduce({fmt::format("x{}", step), fmt::format("y{}", step)},
                            {x.tensor(), y.tensor()}, {x.tensor(), y.tensor()}, summed);
    double xs = 0;
    for (int r = 0; r < n; ++r) xs += step < r + 2 ? r + 1.0 : 0.0;
    expect(get(x.bytes.data(), x.dtype, 40008) == static_cast<float>(xs + active * (40008 % 7)) &&
               get(y.bytes.data(), y.dtype, 0) == static_cast<float>(2 * xs),
           fmt::format("step {}: fused tensors summed over the {} active ranks", step, active));
  }
  const int last = hoop::join();
  fmt::print("rank {}: last joined {}\n", me, last);
  expect(last == n - 1, "the last rank joined last");
  hoop::shutdown();
  return 0;
}

int process_set_scenario() {
  hoop::init();
  const int me = hoop::rank();
  // Two overlapping sets of a 3-rank job: {0, 1} and {1, 2}, used concurrently by rank 1.
  const hoop::ProcessSet low = hoop::add_process_set({0, 1});
  const hoop::ProcessSet high = hoop::add_process_set({1, 2});
  std::vector<hoop::Handle> handles;
  Buf a(DataType::kI32, {4});
  Buf b(DataType::kI32, {4});
  fill(a.bytes.data(), a.dtype, 4, [&](std::size_t) { return me + 1.0; });
  fill(b.bytes.data(), b.dtype, 4, [&](std::size_t) { return me + 1.0; });
  hoop::ReduceOptions o;
  o.op = ReduceOp::kSum;
  if (me <= 1) {
    o.process_set = low;
    handles.push_back(hoop::allreduce_async("x", a.tensor(), a.tensor(), o));
  }
  if (me >= 1) {
    o.process_set = high;
    handles.push_back(hoop::allreduce_async("x", b.tensor(), b.tensor(), o));
  }
  for (auto& h : handles) h.wait();
  if (me <= 1) expect(get(a.bytes.data(), a.dtype, 0) == 3, "sum over {0, 1}");
  if (me >= 1) expect(get(b.bytes.data(), b.dtype, 0) == 5, "sum over {1, 2}");
  expect(hoop::process_set_rank(high) == (me >= 1 ? me - 1 : -1), "rank within the set");
  try {
    o.process_set = high;
    if (me == 0) hoop::allreduce("y", a.tensor(), a.tensor(), o);
    if (me == 0) expect(false, "a non-member cannot use a set");
  } catch (const hoop::Error& e) {
    fmt::print("rank {}: non-member: {}\n", me, e.status().to_string());
  }
  hoop::remove_process_set(low);
  hoop::remove_process_set(high);
  mixed_step(4, 0, ReduceOp::kSum);
  hoop::shutdown();
  return 0;
}

int compare_scenario() {
  // The runtime's result is bit-for-bit the Communicator's for the same call.
  hoop::init();
  auto comm = hoop::Communicator::create().value();
  const int me = hoop::rank();
  for (std::size_t count : {std::size_t{1}, std::size_t{1023}, std::size_t{1} << 18}) {
    std::vector<float> in(count);
    std::mt19937 rng(static_cast<unsigned>(me * 7 + count));
    std::uniform_real_distribution<float> dist(-1, 1);
    for (float& v : in) v = dist(rng);
    std::vector<float> via_runtime(count);
    std::vector<float> via_comm(count);
    hoop::ReduceOptions o;
    o.op = ReduceOp::kAvg;
    hoop::allreduce(fmt::format("cmp{}", count),
                    Tensor{in.data(), DataType::kF32, {static_cast<std::int64_t>(count)}},
                    Tensor{via_runtime.data(), DataType::kF32, {static_cast<std::int64_t>(count)}},
                    o);
    hoop::AllreduceOptions c;
    c.input = in.data();
    c.output = via_comm.data();
    c.count = count;
    c.op = ReduceOp::kAvg;
    hoop::Status s = hoop::allreduce(*comm, c);
    expect(s.ok(), s.to_string());
    expect(std::memcmp(via_runtime.data(), via_comm.data(), count * 4) == 0,
           fmt::format("runtime and communicator agree bit for bit on {} floats", count));
  }
  comm.reset();
  hoop::shutdown();
  return 0;
}

int scenario(const std::string& name, const std::vector<std::string>& args) {
  if (name == "threads") return hoop::runtime_check::threads_scenario();
  if (name == "carried") return hoop::runtime_check::carried_scenario();
  if (name == "basic") {
    hoop::init();
    const int n = hoop::size();
    expect(hoop::rank() >= 0 && hoop::rank() < n, "rank within size");
    for (ReduceOp op : hoop::kAllReduceOps) mixed_step(16, static_cast<int>(op), op);
    hoop::shutdown();
    return 0;
  }
  if (name == "fused_large") {
    // 24 tensors of 512 KiB fuse into 12 MiB, which goes through in pipelined chunks.
    hoop::init();
    const int me = hoop::rank();
    const int n = hoop::size();
    std::vector<Buf> bufs;
    std::vector<hoop::Handle> handles;
    hoop::ReduceOptions o;
    o.op = ReduceOp::kSum;
    o.postscale = 2.0;
    for (int t = 0; t < 24; ++t) {
      bufs.emplace_back(DataType::kF32, std::vector<std::int64_t>{128 << 10});
      fill(bufs.back().bytes.data(), DataType::kF32, bufs.back().count(),
           [&](std::size_t i) { return static_cast<double>((i + t + me) % 8); });
    }
    for (int t = 0; t < 24; ++t)
      handles.push_back(
          hoop::allreduce_async(fmt::format("big.{}", t), bufs[t].tensor(), bufs[t].tensor(), o));
    for (int t = 0; t < 24; ++t) {
      handles[t].wait();
      for (std::size_t i = 0; i < bufs[t].count(); i += 997) {
        double want = 0;
        for (int r = 0; r < n; ++r) want += static_cast<double>((i + t + r) % 8);
        const double got = get(bufs[t].bytes.data(), DataType::kF32, i);
        if (got != want * 2) {
          expect(false, fmt::format("tensor {} element {}: got {} want {}", t, i, got, want * 2));
          break;
        }
      }
    }
    hoop::shutdown();
    return 0;
  }
  if (name == "many") {
    hoop::init();
    const int steps = args.empty() ? 3 : std::stoi(args[0]);
    for (int s = 0; s < steps; ++s) mixed_step(1000, s, ReduceOp::kSum);
    hoop::shutdown();
    return 0;
  }
  if (name == "collectives") return collectives_scenario();
  if (name == "mismatch") return mismatch_scenario(args.at(0));
  if (name == "duplicate") {
    // Each rank in turn submits a name no other rank has submitted yet, so it is still
    // pending when the same rank submits it again; the others wait on a gate meanwhile.
    hoop::init();
    std::vector<Buf> bufs;
    std::vector<hoop::Handle> handles;
    for (int r = 0; r < hoop::size(); ++r)
      bufs.emplace_back(DataType::kF32, std::vector<int64_t>{4});
    const auto name_of = [](int r) { return fmt::format("twice{}", r); };
    for (int r = 0; r < hoop::size(); ++r) {
      if (r == hoop::rank()) {
        handles.push_back(hoop::allreduce_async(name_of(r), bufs[r].tensor(), bufs[r].tensor()));
        try {
          hoop::allreduce_async(name_of(r), bufs[r].tensor(), bufs[r].tensor());
          expect(false, "a second submission of a pending name must throw");
        } catch (const hoop::Error& e) {
          fmt::print("rank {}: duplicate: {}\n", hoop::rank(), e.status().to_string());
        }
      }
      Buf gate(DataType::kF32, {1});
      hoop::allreduce(fmt::format("gate{}", r), gate.tensor(), gate.tensor());
    }
    for (int r = 0; r < hoop::size(); ++r) {
      if (r != hoop::rank())
        handles.push_back(hoop::allreduce_async(name_of(r), bufs[r].tensor(), bufs[r].tensor()));
    }
    for (hoop::Handle& h : handles) h.wait();
    // A name twice within one group: refused at once, and nothing of the group queues (the
    // same names then run as a proper group).
    Buf g(DataType::kF32, {4});
    try {
      hoop::grouped_allreduce_async({"g0", "g1", "g0"}, {g.tensor(), g.tensor(), g.tensor()},
                                    {g.tensor(), g.tensor(), g.tensor()});
      expect(false, "a group naming a tensor twice must throw");
    } catch (const hoop::Error& e) {
      fmt::print("rank {}: duplicate: {}\n", hoop::rank(), e.status().to_string());
    }
    Buf g1(DataType::kF32, {4});
    hoop::grouped_allreduce({"g0", "g1"}, {g.tensor(), g1.tensor()}, {g.tensor(), g1.tensor()});
    hoop::shutdown();
    return 0;
  }
  if (name == "stall") {
    // Rank 1 submits late; rank 0's stall inspector names it meanwhile.
    hoop::init();
    Buf a(DataType::kF32, {4});
    if (hoop::rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    hoop::allreduce("late", a.tensor(), a.tensor());
    hoop::shutdown();
    return 0;
  }
  if (name == "stall_shutdown") {
    // Rank 1 never submits "never"; with HOOP_STALL_SHUTDOWN_SECONDS every rank fails.
    hoop::init();
    Buf a(DataType::kF32, {4});
    if (hoop::rank() != 1) {
      hoop::Status s = hoop::allreduce_async("never", a.tensor(), a.tensor()).status();
      fmt::print("rank {}: stalled: {}\n", hoop::rank(), s.to_string());
      expect(!s.ok(), "the stalled tensor fails");
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(3000));
      try {
        hoop::allreduce("after", a.tensor(), a.tensor());
        expect(false, "work after a stall shutdown must fail");
      } catch (const hoop::Error& e) {
        fmt::print("rank {}: stalled: {}\n", hoop::rank(), e.status().to_string());
      }
    }
    hoop::shutdown();
    return 0;
  }
  if (name == "join") return join_scenario();
  if (name == "process_sets") return process_set_scenario();
  if (name == "cycles") {
    for (int cycle = 0; cycle < 3; ++cycle) {
      hoop::init();
      hoop::init();  // a second init is a no-op
      mixed_step(8, cycle, ReduceOp::kSum);
      hoop::shutdown();
      hoop::shutdown();
      expect(!hoop::is_initialized(), "shut down");
    }
    return 0;
  }
  if (name == "compare") return compare_scenario();
  if (name == "die") {
    // Rank 1 dies mid-run; every other rank's pending and later work fails naming it.
    std::signal(SIGTERM, SIG_IGN);  // hooprun stops the job when rank 1 dies; report first
    hoop::init();
    Buf a(DataType::kF32, {1024});
    for (int step = 0; step < 5; ++step)
      hoop::allreduce(fmt::format("s{}", step), a.tensor(), a.tensor());
    if (hoop::rank() == 1) ::raise(SIGKILL);
    try {
      for (int step = 5; step < 1000; ++step)
        hoop::allreduce(fmt::format("s{}", step), a.tensor(), a.tensor());
      expect(false, "the job must fail after rank 1 died");
    } catch (const hoop::Error& e) {
      fmt::print("rank {}: after death: {}\n", hoop::rank(), e.status().to_string());
    }
    hoop::shutdown();
    return 0;
  }
  fmt::print("unknown scenario {}\n", name);
  return 2;
}

}  // namespace
