// A rank for the collective tests, launched by `hooprun -np N comm_check MODE ...`. Modes:
//   check [--algos a,b] [--counts c,d] [--dtypes e,f] [--ops g,h] [--big]: every collective x
//       dtype x op x algorithm x count x in-place/out-of-place (--dtypes and --ops narrow the
//       reductions' dtypes and ops) on seeded random data, each result compared with a
//       reference computed locally from every rank's regenerated input; prints one line per
//       failed case and "checked K cases" at the end; exit 1 on any failure.
//   kill VICTIM AFTER: large ring allreduces in a loop; rank VICTIM SIGKILLs itself before
//       iteration AFTER; the others print the error they get and how long the call took.
//   loop SECONDS: the same allreduces for SECONDS with no victim, for faults made from outside
//       (a link taken down); both modes print "rank R: looping" after the first allreduce.
//   mismatch: rank 1 passes a different count to allreduce; every rank prints its error.
//   badargs: bad arguments return invalid_argument without communicating.
//   pingpong: ranks 0 and 1 time small and large messages (the cost model's alpha and beta).
//   eager DIR: the giving ranks of small rooted calls return before the others call them
//       (comm_eager.h).
// Any mode takes --hosts K first: the ranks then claim K simulated hosts of consecutive ranks
// (HOOP_HOST_ID), so pairs on one "host" use shared memory and the others TCP. With K hosts
// (or HOOP_CROSS_SIZE hosts from the launcher) of equal rank counts, check adds the
// hierarchical allreduce to its algorithms.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "hoop/communicator.h"
#include "tests/comm/comm_checker.h"
#include "tests/comm/comm_eager.h"
#include "tests/comm/comm_reference.h"
#include "tests/comm/comm_rooted.h"
#include "tests/comm/simulated_hosts.h"

namespace {

using hoop::Algorithm;
using hoop::Communicator;
using hoop::DataType;
using hoop::ReduceOp;
using namespace hoop::comm_check;  // NOLINT(google-build-using-namespace)

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t comma = s.find(',', start);
    const std::size_t end = comma == std::string::npos ? s.size() : comma;
    if (end > start) out.push_back(s.substr(start, end - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

/// Every rank's input of `count` elements for case `id`.
std::vector<std::vector<std::byte>> all_inputs(std::uint64_t id, int n, DataType dt,
                                               std::size_t count) {
  std::vector<std::vector<std::byte>> in(n);
  for (int r = 0; r < n; ++r) {
    in[r].resize(count * hoop::dtype_size(dt) + 1);
    gen(id, r, dt, count, in[r].data());
  }
  return in;
}

int run_check(Communicator& comm, const std::vector<Algorithm>& algos,
              const std::vector<std::size_t>& counts, const std::vector<DataType>& dtypes,
              const std::vector<ReduceOp>& ops, bool big) {
  Checker ck(comm);
  const int n = comm.size();
  const int me = comm.rank();
  std::uint64_t id = 0;
  const std::size_t kBig = (std::size_t{1} << 20) + 3;

  // allreduce_list over the same inputs, split at points that differ between the ranks (empty
  // buffers included): the same bits as allreduce's `expected`, over both of its paths.
  auto allreduce_list_case = [&](DataType dt, ReduceOp op,
                                 const std::vector<std::vector<std::byte>>& in,
                                 const std::vector<std::byte>& expected, std::size_t count,
                                 bool in_place, const std::string& what) {
    const std::size_t es = hoop::dtype_size(dt);
    std::vector<std::byte> out(count * es + 1);
    if (in_place) std::memcpy(out.data(), in[me].data(), count * es);
    std::vector<hoop::AllreduceBuffer> list;
    std::uint64_t rng = id * 7919 + static_cast<std::uint64_t>(me) * 104729 + 1;
    for (std::size_t at = 0; at < count || list.empty();) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      const std::size_t left = count - at;
      std::size_t take = (rng >> 33) % (std::max<std::size_t>(left / 3, 2) + 1);
      if (list.size() > 64) take = left;
      take = std::min(take, left);
      hoop::AllreduceBuffer b;
      b.output = out.data() + at * es;
      // In place: alternately the output itself and a null input.
      b.input = in_place ? (list.size() % 2 == 0 ? b.output : nullptr) : in[me].data() + at * es;
      b.count = take;
      list.push_back(b);
      at += take;
    }
    hoop::AllreduceListOptions l;
    l.buffers = list;
    l.dtype = dt;
    l.op = op;
    const std::string lwhat = "allreduce_list " + what.substr(what.find(' ') + 1);
    if (auto s = hoop::allreduce_list(comm, l); !s.ok()) ck.fatal(lwhat, s);
    ck.check_equal(lwhat, dt, expected.data(), out.data(), count);
  };

  auto allreduce_case = [&](Algorithm algo, DataType dt, ReduceOp op, std::size_t count,
                            bool in_place) {
    ++id;
    const auto in = all_inputs(id, n, dt, count);
    const std::size_t es = hoop::dtype_size(dt);
    std::vector<std::byte> out(count * es + 1);
    hoop::AllreduceOptions o;
    o.count = count;
    o.dtype = dt;
    o.op = op;
    o.algorithm = algo;
    if (in_place) {
      std::memcpy(out.data(), in[me].data(), count * es);
      o.input = out.data();
    } else {
      o.input = in[me].data();
    }
    o.output = out.data();
    const std::string what = fmt::format("allreduce algo={} dtype={} op={} count={} inplace={}",
                                         hoop::algorithm_name(algo), hoop::dtype_name(dt),
                                         hoop::op_name(op), count, in_place);
    if (auto s = hoop::allreduce(comm, o); !s.ok()) ck.fatal(what, s);
    ck.check_reduced(what, dt, op, in, 0, out.data(), count);
    // In place on every other case and out of place on the rest: the list's own logic (the
    // layouts, the pieces) is the same for every dtype and op.
    if (algo == Algorithm::kAuto && in_place == (id % 2 == 0))
      allreduce_list_case(dt, op, in, out, count, in_place, what);
  };

  for (Algorithm algo : algos) {
    for (DataType dt : dtypes)
      for (ReduceOp op : ops)
        for (std::size_t count : counts)
          for (bool in_place : {false, true}) allreduce_case(algo, dt, op, count, in_place);
    if (big) {
      allreduce_case(algo, DataType::kF32, ReduceOp::kSum, kBig, false);
      allreduce_case(algo, DataType::kF32, ReduceOp::kSum, kBig, true);
      allreduce_case(algo, DataType::kBF16, ReduceOp::kAvg, kBig, false);
      allreduce_case(algo, DataType::kI32, ReduceOp::kProd, kBig, true);
    }
    ck.check_identical(fmt::format("allreduce algo={}", hoop::algorithm_name(algo)));
  }

  std::vector<std::size_t> all_counts = counts;
  if (big) all_counts.push_back(kBig);

  // reduce_scatter: every dtype and op.
  for (DataType dt : dtypes) {
    for (ReduceOp op : ops) {
      for (std::size_t count : counts) {
        for (bool in_place : {false, true}) {
          ++id;
          const std::size_t es = hoop::dtype_size(dt);
          const auto in = all_inputs(id, n, dt, count * n);
          std::vector<std::byte> buf(count * n * es + 1);
          hoop::ReduceScatterOptions o;
          o.count = count;
          o.dtype = dt;
          o.op = op;
          if (in_place) {
            std::memcpy(buf.data(), in[me].data(), count * n * es);
            o.input = nullptr;
          } else {
            o.input = in[me].data();
          }
          o.output = buf.data();
          const std::string what =
              fmt::format("reduce_scatter dtype={} op={} count={} inplace={}", hoop::dtype_name(dt),
                          hoop::op_name(op), count, in_place);
          if (auto s = hoop::reduce_scatter(comm, o); !s.ok()) ck.fatal(what, s);
          ck.check_reduced(what, dt, op, in, count * me, buf.data(), count);
        }
      }
    }
  }
  ck.forget_hash();  // each rank holds a different block: nothing to compare

  // broadcast from several roots.
  for (DataType dt : {DataType::kU8, DataType::kBF16, DataType::kF32, DataType::kF64}) {
    for (std::size_t count : all_counts) {
      if (count == kBig && dt != DataType::kF32) continue;
      for (int root : {0, n - 1, n / 2}) {
        ++id;
        const std::size_t es = hoop::dtype_size(dt);
        std::vector<std::byte> expected(count * es + 1), buf(count * es + 1, std::byte{0x5a});
        gen(id, root, dt, count, expected.data());
        if (me == root) buf = expected;
        hoop::BroadcastOptions o;
        o.buffer = buf.data();
        o.count = count;
        o.dtype = dt;
        o.root = root;
        const std::string what =
            fmt::format("broadcast dtype={} count={} root={}", hoop::dtype_name(dt), count, root);
        if (auto s = hoop::broadcast(comm, o); !s.ok()) ck.fatal(what, s);
        ck.check_equal(what, dt, expected.data(), buf.data(), count);
      }
    }
  }

  // allgather and allgatherv.
  for (DataType dt : {DataType::kI8, DataType::kF16, DataType::kF64}) {
    for (std::size_t count : all_counts) {
      if (count == kBig && dt != DataType::kF64) continue;
      const std::size_t es = hoop::dtype_size(dt);
      for (bool in_place : {false, true}) {
        ++id;
        std::vector<std::byte> expected(count * n * es + 1), out(count * n * es + 1);
        for (int r = 0; r < n; ++r) gen(id, r, dt, count, expected.data() + r * count * es);
        std::vector<std::byte> mine(count * es + 1);
        gen(id, me, dt, count, mine.data());
        hoop::AllgatherOptions o;
        o.count = count;
        o.dtype = dt;
        o.output = out.data();
        if (in_place) {
          std::memcpy(out.data() + me * count * es, mine.data(), count * es);
          o.input = out.data() + me * count * es;
        } else {
          o.input = mine.data();
        }
        const std::string what = fmt::format("allgather dtype={} count={} inplace={}",
                                             hoop::dtype_name(dt), count, in_place);
        if (auto s = hoop::allgather(comm, o); !s.ok()) ck.fatal(what, s);
        ck.check_equal(what, dt, expected.data(), out.data(), count * n);
      }
      ++id;
      // Uneven counts, some ranks contributing nothing.
      std::vector<std::size_t> cnt(n);
      std::size_t total = 0;
      for (int r = 0; r < n; ++r) total += cnt[r] = r % 3 == 1 ? 0 : count + r;
      std::vector<std::byte> expected(total * es + 1), out(total * es + 1);
      std::size_t at = 0;
      for (int r = 0; r < n; ++r) {
        gen(id, r, dt, cnt[r], expected.data() + at * es);
        at += cnt[r];
      }
      std::vector<std::byte> mine(cnt[me] * es + 1);
      gen(id, me, dt, cnt[me], mine.data());
      hoop::AllgathervOptions o;
      o.input = mine.data();
      o.output = out.data();
      o.counts = cnt;
      o.dtype = dt;
      const std::string what =
          fmt::format("allgatherv dtype={} base_count={}", hoop::dtype_name(dt), count);
      if (auto s = hoop::allgatherv(comm, o); !s.ok()) ck.fatal(what, s);
      ck.check_equal(what, dt, expected.data(), out.data(), total);
    }
  }

  // alltoall and alltoallv.
  for (DataType dt : {DataType::kI32, DataType::kBF16}) {
    const std::size_t es = hoop::dtype_size(dt);
    for (std::size_t count : counts) {
      for (bool in_place : {false, true}) {
        ++id;
        // Rank r's input is block j = gen(id, r * n + j).
        std::vector<std::byte> in(count * n * es + 1), out(count * n * es + 1),
            expected(count * n * es + 1);
        for (int j = 0; j < n; ++j) {
          gen(id, me * n + j, dt, count, in.data() + j * count * es);
          gen(id, j * n + me, dt, count, expected.data() + j * count * es);
        }
        hoop::AlltoallOptions o;
        o.count = count;
        o.dtype = dt;
        o.output = out.data();
        if (in_place) {
          out = in;
          o.input = out.data();
        } else {
          o.input = in.data();
        }
        const std::string what = fmt::format("alltoall dtype={} count={} inplace={}",
                                             hoop::dtype_name(dt), count, in_place);
        if (auto s = hoop::alltoall(comm, o); !s.ok()) ck.fatal(what, s);
        ck.check_equal(what, dt, expected.data(), out.data(), count * n);
      }
      ++id;
      auto pair_count = [&](int from, int to) -> std::size_t {
        return (static_cast<std::size_t>(from) + 2 * static_cast<std::size_t>(to) + count) % 5;
      };
      std::vector<std::size_t> sc(n), rc(n);
      std::size_t st = 0, rt = 0;
      for (int j = 0; j < n; ++j) {
        st += sc[j] = pair_count(me, j);
        rt += rc[j] = pair_count(j, me);
      }
      std::vector<std::byte> in(st * es + 1), out(rt * es + 1), expected(rt * es + 1);
      std::size_t sa = 0, ra = 0;
      for (int j = 0; j < n; ++j) {
        gen(id, me * n + j, dt, sc[j], in.data() + sa * es);
        gen(id, j * n + me, dt, rc[j], expected.data() + ra * es);
        sa += sc[j];
        ra += rc[j];
      }
      hoop::AlltoallvOptions o;
      o.input = in.data();
      o.send_counts = sc;
      o.output = out.data();
      o.recv_counts = rc;
      o.dtype = dt;
      const std::string what =
          fmt::format("alltoallv dtype={} base_count={}", hoop::dtype_name(dt), count);
      if (auto s = hoop::alltoallv(comm, o); !s.ok()) ck.fatal(what, s);
      ck.check_equal(what, dt, expected.data(), out.data(), rt);
    }
  }

  // Rooted, point-to-point, split and non-blocking calls, checked bit for bit.
  std::vector<std::string> problems;
  auto more = check_more(comm, counts, dtypes, ops, problems);
  if (!more.ok()) ck.fatal("rooted, p2p, split and non-blocking calls", more.status());
  ck.add_cases(*more, problems);

  for (int i = 0; i < 3; ++i) {
    if (auto s = hoop::barrier(comm); !s.ok()) ck.fatal("barrier", s);
  }
  if (ck.failures() > 0) {
    fmt::print("rank {}: {} of {} cases failed\n", me, ck.failures(), ck.cases());
    return 1;
  }
  fmt::print("rank {}: checked {} cases\n", me, ck.cases());
  return 0;
}

// Victim -1: nobody dies; the loop ends after `seconds`.
int run_kill(Communicator& comm, int victim, int after, double seconds = 1e9) {
  // hooprun stops the other ranks once one dies; they stay to report what they saw.
  std::signal(SIGTERM, SIG_IGN);
  const std::size_t count = std::size_t{1} << 20;
  std::vector<float> buf(count, 1.0f);
  const auto loop_start = std::chrono::steady_clock::now();
  for (int it = 0; it < 100000; ++it) {
    if (it == 1) {
      fmt::print("rank {}: looping\n", comm.rank());
      std::fflush(stdout);
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start).count() >
        seconds) {
      break;
    }
    if (comm.rank() == victim && it == after) std::raise(SIGKILL);
    hoop::AllreduceOptions o;
    o.output = buf.data();
    o.count = count;
    // The ring unless HOOP_ALGO names another.
    o.algorithm = comm.forced_algorithm() == Algorithm::kAuto ? Algorithm::kRing : Algorithm::kAuto;
    const auto start = std::chrono::steady_clock::now();
    hoop::Status s = hoop::allreduce(comm, o);
    if (!s.ok()) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      fmt::print("rank {}: allreduce failed at iteration {} after {:.3f} s: {}\n", comm.rank(), it,
                 secs, s.to_string());
      return 2;
    }
    std::fill(buf.begin(), buf.end(), 1.0f);
  }
  fmt::print("rank {}: no failure seen\n", comm.rank());
  return 0;
}

int run_mismatch(Communicator& comm) {
  std::signal(SIGTERM, SIG_IGN);
  const std::size_t count = comm.rank() == 1 ? 1001 : 1000;
  std::vector<float> buf(count, 1.0f);
  hoop::AllreduceOptions o;
  o.output = buf.data();
  o.count = count;
  o.algorithm = Algorithm::kRing;
  hoop::Status s = hoop::allreduce(comm, o);
  if (s.ok()) s = hoop::barrier(comm);
  fmt::print("rank {}: mismatch result: {}\n", comm.rank(), s.to_string());
  return s.ok() ? 0 : 2;
}

int run_badargs(Communicator& comm) {
  int bad = 0;
  auto expect = [&](const char* what, const hoop::Status& s) {
    if (s.code() != hoop::StatusCode::kInvalidArgument) {
      fmt::print("FAIL badargs {}: got {}\n", what, s.to_string());
      ++bad;
    }
  };
  float x[4] = {1, 2, 3, 4};
  hoop::AllreduceOptions ar;
  ar.count = 4;
  expect("allreduce null output", hoop::allreduce(comm, ar));
  ar.output = x;
  ar.dtype = static_cast<DataType>(99);
  expect("allreduce unknown dtype", hoop::allreduce(comm, ar));
  ar.dtype = DataType::kF32;
  ar.op = static_cast<ReduceOp>(42);
  expect("allreduce unknown op", hoop::allreduce(comm, ar));
  ar.op = ReduceOp::kSum;
  ar.count = SIZE_MAX / 2;
  expect("allreduce count overflow", hoop::allreduce(comm, ar));
  hoop::BroadcastOptions bc;
  bc.buffer = x;
  bc.count = 4;
  bc.root = comm.size();
  expect("broadcast root out of range", hoop::broadcast(comm, bc));
  bc.root = -1;
  expect("broadcast negative root", hoop::broadcast(comm, bc));
  std::vector<std::size_t> wrong(comm.size() + 1, 1);
  hoop::AllgathervOptions ag;
  ag.input = x;
  ag.output = x;
  ag.counts = wrong;
  expect("allgatherv counts size", hoop::allgatherv(comm, ag));
  hoop::AlltoallvOptions av;
  av.input = x;
  av.output = x;
  av.send_counts = wrong;
  av.recv_counts = wrong;
  expect("alltoallv counts size", hoop::alltoallv(comm, av));
  hoop::AllgatherOptions ga;
  ga.output = x;
  ga.count = SIZE_MAX / 3;
  expect("allgather count * size overflow", hoop::allgather(comm, ga));
  // Nothing was sent: a real collective still lines up on every rank.
  float one = 1.0f;
  ar.input = nullptr;
  ar.output = &one;
  ar.count = 1;
  if (auto s = hoop::allreduce(comm, ar); !s.ok() || one != static_cast<float>(comm.size())) {
    fmt::print("FAIL badargs: allreduce after bad calls: {} value {}\n", s.to_string(), one);
    ++bad;
  }
  if (bad == 0) fmt::print("rank {}: badargs ok\n", comm.rank());
  return bad == 0 ? 0 : 1;
}

int run_pingpong(Communicator& comm) {
  if (comm.size() < 2 || comm.rank() > 1) return 0;
  hoop::Transport& t = comm.transport();
  const int peer = 1 - comm.rank();
  const auto deadline = hoop::Clock::now() + std::chrono::seconds(60);
  auto one_way = [&](std::size_t bytes, int iters) -> double {
    std::vector<std::byte> buf(bytes + 1);
    std::byte ack{};
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      if (comm.rank() == 0) {
        (void)hoop::wait_one(t, t.send(peer, buf.data(), bytes).value(), deadline);
        (void)hoop::wait_one(t, t.recv(peer, &ack, 1).value(), deadline);
      } else {
        (void)hoop::wait_one(t, t.recv(peer, buf.data(), bytes).value(), deadline);
        (void)hoop::wait_one(t, t.send(peer, &ack, 1).value(), deadline);
      }
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
  };
  const double rtt = one_way(1, 2000);
  const double t1 = one_way(std::size_t{1} << 20, 20);
  const double t16 = one_way(std::size_t{16} << 20, 10);
  if (comm.rank() == 0) {
    fmt::print("alpha_us {:.2f} beta_ns_per_byte {:.4f}\n", rtt / 2 * 1e6,
               (t16 - t1) / double((std::size_t{16} << 20) - (std::size_t{1} << 20)) * 1e9);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int hosts = 0;
  if (argc > 2 && std::string(argv[1]) == "--hosts") {
    hosts = std::atoi(argv[2]);
    simulate_hosts(hosts);
    argv += 2;
    argc -= 2;
  } else if (const char* cross = std::getenv("HOOP_CROSS_SIZE")) {
    hosts = std::atoi(cross);  // real hosts, as the launcher laid them out (hooprun -H)
  }
  const std::string mode = argc > 1 ? argv[1] : "check";
  auto comm = Communicator::create();
  if (!comm.ok()) {
    fmt::print("FAIL create: {}\n", comm.status().to_string());
    return 1;
  }
  Communicator& c = **comm;
  int rc = 0;
  if (mode == "check") {
    std::vector<Algorithm> algos = {Algorithm::kRing, Algorithm::kRecursiveDoubling,
                                    Algorithm::kRabenseifner, Algorithm::kTree, Algorithm::kAuto};
    if (hierarchical_possible(c.size(), hosts)) algos.push_back(Algorithm::kHierarchical);
    std::vector<std::size_t> counts = {0, 1, 7, 1023};
    std::vector<DataType> dtypes(std::begin(hoop::kAllDataTypes), std::end(hoop::kAllDataTypes));
    std::vector<ReduceOp> ops(std::begin(hoop::kAllReduceOps), std::end(hoop::kAllReduceOps));
    bool big = false;
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--big") {
        big = true;
      } else if (a == "--algos" && i + 1 < argc) {
        algos.clear();
        for (const std::string& s : split(argv[++i])) algos.push_back(*hoop::parse_algorithm(s));
      } else if (a == "--counts" && i + 1 < argc) {
        counts.clear();
        for (const std::string& s : split(argv[++i])) counts.push_back(std::stoull(s));
      } else if ((a == "--dtypes" || a == "--ops") && i + 1 < argc) {
        const bool is_op = a == "--ops";
        is_op ? ops.clear() : dtypes.clear();
        for (const std::string& s : split(argv[++i])) {
          const auto dt = hoop::parse_dtype(s);
          const auto op = hoop::parse_op(s);
          if (is_op ? !op : !dt) {
            fmt::print("comm_check: unknown name '{}' after {}\n", s, a);
            return 64;
          }
          is_op ? ops.push_back(*op) : dtypes.push_back(*dt);
        }
      }
    }
    rc = run_check(c, algos, counts, dtypes, ops, big);
  } else if (mode == "kill" && argc > 3) {
    rc = run_kill(c, std::atoi(argv[2]), std::atoi(argv[3]));
  } else if (mode == "loop" && argc > 2) {
    rc = run_kill(c, -1, -1, std::atof(argv[2]));
  } else if (mode == "mismatch") {
    rc = run_mismatch(c);
  } else if (mode == "badargs") {
    rc = run_badargs(c);
  } else if (mode == "pingpong") {
    rc = run_pingpong(c);
  } else if (mode == "eager" && argc > 2) {
    rc = run_eager(c, argv[2]);
  } else {
    fmt::print(
        "usage: comm_check [--hosts K] check|kill VICTIM AFTER|loop SECONDS|mismatch|badargs|"
        "pingpong|eager DIR\n");
    return 64;
  }
  std::fflush(stdout);
  return rc;
}
