// Helpers of the tests that run train_fashion_mnist under hooprun: the parameters a run saves
// (--save-params), and their comparison.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "hoop/train.h"
#include "tests/launch/hooprun_harness.h"

namespace hoop::launch::testing {

using Params = std::map<std::string, std::vector<float>>;

inline Params read_params(const std::string& path) {
  Params params;
  std::ifstream in(path, std::ios::binary);
  std::string name;
  std::size_t count = 0;
  while (in >> name >> count) {
    in.get();  // the newline after the count
    std::vector<float> values(count);
    in.read(reinterpret_cast<char*>(values.data()),
            static_cast<std::streamsize>(count * sizeof(float)));
    params[name] = std::move(values);
  }
  return params;
}

inline bool have_data() {
  return std::filesystem::exists(train::default_data_dir() + "/train-images-idx3-ubyte.gz") ||
         std::filesystem::exists(train::default_data_dir() + "/train-images-idx3-ubyte");
}

// Trains with `ranks` processes and returns rank 0's final parameters.
inline Params train_run(int ranks, const std::vector<std::string>& flags, const TempDir& dir,
                 const std::string& tag) {
  const std::string out = dir.file(tag + ".params");
  std::vector<std::string> args{"-np",
                                std::to_string(ranks),
                                HOOP_TRAIN_BIN,
                                "--progress",
                                "off",
                                "--baseline-steps",
                                "0",
                                "--save-params",
                                out};
  args.insert(args.end(), flags.begin(), flags.end());
  const RunResult r = run_hooprun(args, {}, std::chrono::seconds(240));
  EXPECT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return read_params(out);
}

// Elementwise |a - b| <= atol + rtol * |b| over every parameter.
inline void expect_close(const Params& a, const Params& b, double atol, double rtol) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (const auto& [name, values] : a) {
    const auto it = b.find(name);
    ASSERT_NE(it, b.end()) << name;
    ASSERT_EQ(values.size(), it->second.size()) << name;
    std::size_t bad = 0;
    double worst = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double diff = std::abs(double{values[i]} - double{it->second[i]});
      if (diff > atol + rtol * std::abs(double{it->second[i]})) ++bad;
      worst = std::max(worst, diff);
    }
    EXPECT_EQ(bad, 0u) << name << ": largest difference " << worst;
  }
}

/// A test that trains on the real dataset, in a fresh directory; skipped where the dataset is
/// not installed.
class TrainingDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_data()) GTEST_SKIP() << "no Fashion-MNIST at " << train::default_data_dir();
  }
  TempDir dir_;
};

}  // namespace hoop::launch::testing
