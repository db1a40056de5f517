// The models the examples and benchmarks train: an MLP and LeNet-5.
#include <fmt/format.h>

#include <random>
#include <string>
#include <vector>

#include "hoop/train.h"

namespace hoop::train {

Sequential make_mlp(const std::vector<std::int64_t>& hidden, std::int64_t classes, float dropout_p,
                    std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Sequential model;
  model.add(flatten());
  std::int64_t width = 28 * 28;
  for (std::size_t i = 0; i < hidden.size(); ++i) {
    model.add(linear(width, hidden[i], rng));
    model.add(relu());
    if (dropout_p > 0) {
      // Each dropout layer gets its own stream (golden-ratio offsets, as SplitMix64 steps) so
      // masks of different layers are not copies of each other.
      model.add(dropout(dropout_p, seed + 0x9E3779B97F4A7C15ULL * (i + 1)));
    }
    width = hidden[i];
  }
  model.add(linear(width, classes, rng));
  return model;
}

Sequential make_lenet5(std::int64_t classes, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Sequential model;
  model.add(conv2d(1, 6, 5, 1, 2, rng));  // [N, 6, 28, 28]
  model.add(relu());
  model.add(max_pool2d(2, 2));             // [N, 6, 14, 14]
  model.add(conv2d(6, 16, 5, 1, 0, rng));  // [N, 16, 10, 10]
  model.add(relu());
  model.add(max_pool2d(2, 2));  // [N, 16, 5, 5]
  model.add(flatten());         // [N, 400]
  model.add(linear(400, 120, rng));
  model.add(relu());
  model.add(linear(120, 84, rng));
  model.add(relu());
  model.add(linear(84, classes, rng));
  return model;
}

Sequential make_model(const std::string& name, std::uint64_t seed) {
  if (name == "mlp") return make_mlp({256, 128}, 10, 0.0f, seed);
  if (name == "lenet5") return make_lenet5(10, seed);
  throw Error(invalid_argument(fmt::format("unknown model \"{}\" (known: mlp, lenet5)", name)));
}

}  // namespace hoop::train
