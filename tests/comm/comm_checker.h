// comm_check's bookkeeping: counts the cases, compares results with references (exactly, or
// within the tolerance of a float reduction), prints one line per failed case and ends the rank
// on a collective's own error.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "hoop/communicator.h"
#include "tests/comm/comm_reference.h"

namespace hoop::comm_check {

class Checker {
 public:
  explicit Checker(Communicator& comm) : comm_(comm), n_(comm.size()), me_(comm.rank()) {}

  int failures() const { return failures_; }
  std::uint64_t cases() const { return cases_; }

  /// Records a failed call; the transport is aborted then, so the run cannot go on.
  [[noreturn]] void fatal(const std::string& what, const hoop::Status& s) {
    fmt::print("FAIL {}: {}\n", what, s.to_string());
    std::fflush(stdout);
    std::exit(1);
  }

  /// Compares `got` (count elements) with the reduction of `inputs` at element offset `base`.
  void check_reduced(const std::string& what, DataType dt, ReduceOp op,
                     const std::vector<std::vector<std::byte>>& inputs, std::size_t base,
                     const std::byte* got, std::size_t count) {
    ++cases_;
    const std::size_t es = hoop::dtype_size(dt);
    std::byte exact[8];
    double approx = 0;
    for (std::size_t i = 0; i < count; ++i) {
      reference(dt, op, n_, inputs, base + i, exact, &approx);
      const std::byte* g = got + i * es;
      bool ok;
      std::string exp_s;
      if (hoop::dtype_is_float(dt)) {
        const double v = as_double(dt, g);
        ok = std::fabs(v - approx) <= tolerance(dt, n_) * std::max(1.0, std::fabs(approx));
        exp_s = fmt::format("{}", approx);
      } else {
        ok = std::memcmp(g, exact, es) == 0;
        exp_s = fmt::format("{}", as_double(dt, exact));
      }
      if (!ok) {
        fail(what, i, fmt::format("{}", as_double(dt, g)), exp_s);
        return;
      }
    }
    if (hoop::dtype_is_float(dt)) hash(got, count * es);
  }

  /// Compares `count` elements of `got` with `expected` bit for bit.
  void check_equal(const std::string& what, DataType dt, const std::byte* expected,
                   const std::byte* got, std::size_t count) {
    ++cases_;
    const std::size_t es = hoop::dtype_size(dt);
    for (std::size_t i = 0; i < count; ++i) {
      if (std::memcmp(got + i * es, expected + i * es, es) != 0) {
        fail(what, i, fmt::format("{}", as_double(dt, got + i * es)),
             fmt::format("{}", as_double(dt, expected + i * es)));
        return;
      }
    }
  }

  /// Counts `cases` checked elsewhere, failing with each of `problems`.
  void add_cases(std::uint64_t cases, const std::vector<std::string>& problems) {
    cases_ += cases;
    for (const std::string& p : problems) {
      ++failures_;
      fmt::print("FAIL {}\n", p);
    }
  }

  /// Drops the results hashed since the last check.
  void forget_hash() { hash_ = 0xcbf29ce484222325ull; }

  /// Checks that every rank hashed the same float results since the last call.
  void check_identical(const std::string& what) {
    std::vector<std::uint64_t> all(n_);
    hoop::AllgatherOptions o;
    o.input = &hash_;
    o.output = all.data();
    o.count = 8;
    o.dtype = DataType::kU8;
    if (auto s = hoop::allgather(comm_, o); !s.ok()) fatal("allgather of result hashes", s);
    for (int r = 0; r < n_; ++r) {
      if (all[r] != all[0]) {
        fmt::print("FAIL {}: float results differ between rank 0 and rank {}\n", what, r);
        ++failures_;
        break;
      }
    }
    forget_hash();
  }

 private:
  void fail(const std::string& what, std::size_t i, const std::string& got,
            const std::string& expected) {
    ++failures_;
    fmt::print("FAIL rank {} {} first bad index {} got {} expected {}\n", me_, what, i, got,
               expected);
  }
  void hash(const std::byte* p, std::size_t bytes) {
    for (std::size_t i = 0; i < bytes; ++i)
      hash_ = (hash_ ^ static_cast<std::uint64_t>(p[i])) * 0x100000001b3ull;
  }

  Communicator& comm_;
  int n_;
  int me_;
  int failures_ = 0;
  std::uint64_t cases_ = 0;
  std::uint64_t hash_ = 0xcbf29ce484222325ull;
};

}  // namespace hoop::comm_check
