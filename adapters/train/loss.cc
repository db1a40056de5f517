// Softmax cross-entropy and accuracy over a batch of logits.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gpu.h"
#include "hoop/train.h"

namespace hoop::train {
namespace {

// Throws unless logits are [N, classes] with N labels, each a valid class index.
void check_batch(const char* function, const Tensor& logits, const std::vector<int>& labels) {
  if (logits.shape().size() != 2 || logits.dim(1) == 0) {
    throw Error(invalid_argument(
        fmt::format("{}: expected logits [N, classes], got {}", function, logits.shape_string())));
  }
  if (static_cast<std::int64_t>(labels.size()) != logits.dim(0)) {
    throw Error(invalid_argument(fmt::format("{}: {} labels for logits {}", function, labels.size(),
                                             logits.shape_string())));
  }
  const std::int64_t classes = logits.dim(1);
  for (std::size_t row = 0; row < labels.size(); ++row) {
    if (labels[row] < 0 || labels[row] >= classes) {
      throw Error(invalid_argument(fmt::format("{}: label {} in row {} is outside [0, {})",
                                               function, labels[row], row, classes)));
    }
  }
}

}  // namespace

float softmax_cross_entropy(const Tensor& logits, const std::vector<int>& labels, Tensor* grad) {
  check_batch("softmax_cross_entropy", logits, labels);
  const std::int64_t n = logits.dim(0);
  const std::int64_t classes = logits.dim(1);
  if (n == 0) {
    throw Error(invalid_argument("softmax_cross_entropy: the mean over an empty batch"));
  }
  if (grad != nullptr && (grad->shape() != logits.shape() || grad->device() != logits.device())) {
    *grad = Tensor(logits.shape(), logits.device());
  }
  if (logits.is_cuda()) {
    // Row losses come back to the host and are added in row order, as below.
    std::vector<double> rows;
    detail::gpu(logits.device())
        .softmax_cross_entropy(logits.data(), labels, classes,
                               grad != nullptr ? grad->data() : nullptr, &rows, nullptr);
    double total = 0.0;
    for (double r : rows) total += r;
    return static_cast<float>(total / static_cast<double>(n));
  }
  const float inv_n = 1.0f / static_cast<float>(n);
  double total = 0.0;
  for (std::int64_t r = 0; r < n; ++r) {
    const float* z = logits.data() + r * classes;
    // Shifting by the row maximum keeps exp() from overflowing; the sum is at least 1.
    const float top = *std::max_element(z, z + classes);
    double sum = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(z[c] - top));
    const int label = labels[static_cast<std::size_t>(r)];
    total += std::log(sum) - static_cast<double>(z[label] - top);
    if (grad != nullptr) {
      float* g = grad->data() + r * classes;
      for (std::int64_t c = 0; c < classes; ++c) {
        g[c] = static_cast<float>(std::exp(static_cast<double>(z[c] - top)) / sum) * inv_n;
      }
      g[label] -= inv_n;
    }
  }
  return static_cast<float>(total / static_cast<double>(n));
}

std::size_t count_correct(const Tensor& logits, const std::vector<int>& labels) {
  check_batch("count_correct", logits, labels);
  const std::int64_t classes = logits.dim(1);
  std::size_t correct = 0;
  if (logits.is_cuda()) {
    std::vector<std::uint8_t> rows;
    detail::gpu(logits.device())
        .softmax_cross_entropy(logits.data(), labels, classes, nullptr, nullptr, &rows);
    for (std::uint8_t r : rows) correct += r;
    return correct;
  }
  for (std::size_t r = 0; r < labels.size(); ++r) {
    const float* z = logits.data() + static_cast<std::int64_t>(r) * classes;
    // Ties go to the first maximum, as torch.argmax does.
    if (std::max_element(z, z + classes) - z == labels[r]) ++correct;
  }
  return correct;
}

}  // namespace hoop::train
