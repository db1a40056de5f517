// Sequential: runs layers in order and names their parameters.
#include <fmt/format.h>

#include <memory>
#include <utility>
#include <vector>

#include "hoop/train.h"

namespace hoop::train {

void Sequential::add(std::unique_ptr<Layer> layer) {
  if (!layer) throw Error(invalid_argument("Sequential::add: null layer"));
  const std::size_t index = layers_.size();
  // Layers name their parameters "weight" or "bias"; the index and kind make the names unique
  // and the same on every rank, which the runtime needs to match tensors across ranks.
  for (Parameter* p : layer->parameters()) {
    p->name = fmt::format("{}.{}.{}", index, layer->kind(), p->name);
  }
  layers_.push_back(std::move(layer));
}

void Sequential::to(int device) {
  for (Parameter* p : parameters()) {
    p->value = p->value.to(device);
    p->grad = p->grad.to(device);
  }
}

Tensor Sequential::forward(const Tensor& input, bool training) {
  if (layers_.empty()) return input;
  Tensor x = layers_.front()->forward(input, training);
  for (std::size_t i = 1; i < layers_.size(); ++i) x = layers_[i]->forward(x, training);
  return x;
}

void Sequential::backward(const Tensor& grad_output,
                          const std::function<void(std::size_t layer)>& on_layer_done) {
  if (layers_.empty()) return;
  std::size_t i = layers_.size() - 1;
  Tensor grad = layers_[i]->backward(grad_output);
  if (on_layer_done) on_layer_done(i);
  while (i > 0) {
    --i;
    // The first layer's input gradient is computed too: nothing asks for it yet, and the cost
    // is one GEMM per batch, while skipping it would need another Layer entry point.
    grad = layers_[i]->backward(grad);
    if (on_layer_done) on_layer_done(i);
  }
}

std::vector<Parameter*> Sequential::parameters() {
  std::vector<Parameter*> all;
  for (auto& layer : layers_) {
    for (Parameter* p : layer->parameters()) all.push_back(p);
  }
  return all;
}

std::vector<Parameter*> Sequential::layer_parameters(std::size_t i) {
  return layers_.at(i)->parameters();
}

void Sequential::zero_grad() {
  for (Parameter* p : parameters()) p->grad.fill(0.0f);
}

std::size_t Sequential::parameter_count() {
  std::size_t count = 0;
  for (Parameter* p : parameters()) count += p->value.size();
  return count;
}

}  // namespace hoop::train
