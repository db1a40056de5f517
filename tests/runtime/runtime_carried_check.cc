// The runtime_check scenario "carried": small allreduces whose inputs travel with the
// negotiation once the tensor is cached (RequestList::carried), every dtype, op and scale, counts
// 0, 1, 7 and 256 bytes' worth, one at a time and in one burst (where a list carries only its
// first 4 KiB of inputs and the rest run in collectives). Each result is checked against the
// float64 reference and, bit for bit, against the first step's, which ran in a collective.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "hoop/hoop.h"
#include "tests/comm/comm_reference.h"

namespace hoop::runtime_check {
namespace {

struct Case {
  DataType dtype;
  ReduceOp op;
  std::size_t count;
  bool scaled;  // prescale 0.5 and postscale 2: exact for the floats' inputs (k / 8)
  std::string name;
  std::uint64_t id;
  std::vector<std::byte> in;
  std::vector<std::byte> out;
  std::vector<std::byte> first;  // the result of step 0 (a collective)

  Tensor tensor(std::vector<std::byte>& b) {
    return Tensor{b.data(), dtype, {static_cast<std::int64_t>(count)}, kCpuDevice};
  }
  ReduceOptions options() const {
    ReduceOptions o;
    o.op = op;
    if (scaled) {
      o.prescale = 0.5;
      o.postscale = 2.0;
    }
    return o;
  }
};

std::vector<Case> make_cases(int me) {
  std::vector<Case> cases;
  for (DataType d : kAllDataTypes) {
    const std::size_t es = dtype_size(d);
    for (ReduceOp op : kAllReduceOps) {
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, 256 / es}) {
        Case c{d,     op,
               count, dtype_is_float(d) && count == 7 && op != ReduceOp::kProd,
               "",    cases.size() + 1,
               {},    {},
               {}};
        c.name = fmt::format("carried.{}.{}.{}", dtype_name(d), op_name(op), count);
        c.in.resize(count * es + 1);
        c.out.resize(count * es + 1);
        comm_check::gen(c.id, me, d, count, c.in.data());
        cases.push_back(std::move(c));
      }
    }
  }
  return cases;
}

/// Checks case `c` after step `step`; false (printed) when wrong.
bool check(Case& c, int step, int me, int n) {
  const std::size_t es = dtype_size(c.dtype);
  std::vector<std::vector<std::byte>> all(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    all[r].resize(c.count * es + 1);
    comm_check::gen(c.id, r, c.dtype, c.count, all[r].data());
  }
  for (std::size_t i = 0; i < c.count; ++i) {
    std::byte exact[8] = {};
    double approx = 0;
    comm_check::reference(c.dtype, c.op, n, all, i, exact, &approx);
    const std::byte* got = c.out.data() + i * es;
    const bool ok = dtype_is_float(c.dtype)
                        ? std::fabs(comm_check::as_double(c.dtype, got) - approx) <=
                              comm_check::tolerance(c.dtype, n) * std::max(1.0, std::fabs(approx))
                        : std::memcmp(got, exact, es) == 0;
    if (!ok) {
      fmt::print("rank {}: FAILED step {} {} element {}: got {} want {}\n", me, step, c.name, i,
                 comm_check::as_double(c.dtype, got), approx);
      return false;
    }
  }
  if (step == 0) {
    c.first = c.out;
  } else if (c.out != c.first) {
    // The carried path reduces in rank order, as the shared-memory collective does.
    fmt::print("rank {}: FAILED step {} {}: not the bits of step 0's collective\n", me, step,
               c.name);
    return false;
  }
  return true;
}

}  // namespace

int carried_scenario() {
  hoop::init();
  const int me = hoop::rank();
  const int n = hoop::size();
  std::vector<Case> cases = make_cases(me);
  int wrong = 0;
  for (int step = 0; step < 4; ++step) {
    if (step < 3) {
      // One at a time: a lone cached tensor's list carries its input.
      for (Case& c : cases) {
        hoop::allreduce(c.name, c.tensor(c.in), c.tensor(c.out), c.options());
        wrong += check(c, step, me, n) ? 0 : 1;
      }
      continue;
    }
    std::vector<Handle> handles;
    for (Case& c : cases)
      handles.push_back(
          hoop::allreduce_async(c.name, c.tensor(c.in), c.tensor(c.out), c.options()));
    for (std::size_t i = 0; i < cases.size(); ++i) {
      handles[i].wait();
      wrong += check(cases[i], step, me, n) ? 0 : 1;
    }
  }
  hoop::shutdown();
  return wrong > 0 ? 1 : 0;
}

}  // namespace hoop::runtime_check
