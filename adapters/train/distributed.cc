// Data parallelism for the training core: gradient averaging overlapped with backward, and
// the start-of-training broadcast of the parameters.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "clock.h"
#include "gpu.h"
#include "hoop/elastic.h"
#include "hoop/train.h"

namespace hoop::train {
// One parameter's gradient on its way through the runtime. With fp16 compression the
// gradient travels as f16 in `half` (`gpu_half` for a gradient on a GPU), which is also where
// the average arrives.
struct DistributedOptimizer::Pending {
  Parameter* param = nullptr;
  std::string name;
  Handle handle;
  std::vector<std::uint16_t> half;
  detail::GpuBuffer gpu_half;
};

DistributedOptimizer::DistributedOptimizer(Sequential& model, Optimizer& inner,
                                           DistributedOptions options)
    : model_(model), inner_(inner), options_(std::move(options)) {
  if (options_.backward_passes_per_step < 1)
    throw Error(invalid_argument(
        fmt::format("DistributedOptimizer: backward_passes_per_step must be >= 1, not {}",
                    options_.backward_passes_per_step)));
  if (!is_initialized())
    throw Error(invalid_argument("DistributedOptimizer: call hoop::init() first"));
  for (std::size_t layer = 0; layer < model_.layer_count(); ++layer) {
    for (Parameter* p : model_.layer_parameters(layer)) {
      auto pending = std::make_unique<Pending>();
      pending->param = p;
      pending->name = options_.name_prefix + p->name;
      if (options_.compression == Compression::kFp16 && p->grad.is_cuda()) {
        pending->gpu_half.reserve(p->grad.device(), p->grad.size() * sizeof(std::uint16_t));
      } else if (options_.compression == Compression::kFp16) {
        pending->half.resize(p->grad.size());
      }
      pending_.push_back(std::move(pending));
    }
  }
  started_.assign(model_.layer_count(), false);
}

// A step abandoned by an exception may leave allreduces in flight that still write into the
// gradients: wait for them before the buffers go away.
DistributedOptimizer::~DistributedOptimizer() {
  for (auto& p : pending_) {
    if (p->handle.valid()) (void)p->handle.status();
  }
}

std::function<void(std::size_t)> DistributedOptimizer::hook() {
  return [this](std::size_t layer) {
    // Another pass would add into gradients the runtime is reading.
    if (pass_ >= options_.backward_passes_per_step)
      throw Error(invalid_argument(fmt::format(
          "DistributedOptimizer: more than backward_passes_per_step ({}) backward passes "
          "before step()",
          options_.backward_passes_per_step)));
    if (pass_ + 1 == options_.backward_passes_per_step) start_layer(layer, pass_ + 1);
    // Layer 0 is the last to finish its backward: the pass is over.
    if (layer == 0) ++pass_;
  };
}

void DistributedOptimizer::start_layer(std::size_t layer, int passes) {
  if (started_.at(layer)) return;
  started_[layer] = true;
  ReduceOptions reduce;
  reduce.op = ReduceOp::kAvg;
  reduce.process_set = options_.process_set;
  for (Parameter* p : model_.layer_parameters(layer)) {
    auto it = std::find_if(pending_.begin(), pending_.end(),
                           [p](const auto& e) { return e->param == p; });
    Pending& e = **it;
    if (first_submit_ < 0) first_submit_ = detail::now_seconds();
    hoop::Tensor view = p->grad.view();
    if (options_.compression == Compression::kFp16) {
      // Scaled before narrowing: a sum of passes could overflow f16 where its mean does not.
      const float scale = 1.0f / static_cast<float>(passes);
      float* g = p->grad.data();
      if (p->grad.is_cuda()) {
        auto* half = e.gpu_half.data<std::uint16_t>();
        detail::gpu(p->grad.device()).to_half(g, scale, half, p->grad.size());
        view.data = half;
      } else {
        // In place: the gradient is the average's to overwrite from here on (step()).
        if (scale != 1.0f) {
          for (std::size_t i = 0; i < e.half.size(); ++i) g[i] *= scale;
        }
        f32_to_f16(g, e.half.data(), e.half.size());
        view.data = e.half.data();
      }
      view.dtype = DataType::kF16;
    } else {
      reduce.prescale = 1.0 / passes;
    }
    // The runtime reads device memory on streams of its own: what this layer's backward
    // queued must have finished first.
    synchronize(p->grad.device());
    e.handle = allreduce_async(e.name, view, view, reduce);
  }
}

void DistributedOptimizer::step() {
  // The summed gradients of k backward passes are averaged over the passes too, so that k
  // passes of batch B update like one pass of batch k*B. A step() before
  // backward_passes_per_step passes averages the passes done so far.
  const int passes = std::max(pass_, 1);
  for (std::size_t layer = model_.layer_count(); layer-- > 0;) start_layer(layer, passes);
  const double wait_start = detail::now_seconds();
  Status failed;
  for (auto& e : pending_) {
    Status s = e->handle.status();
    e->handle = Handle();
    if (!s.ok() && failed.ok()) failed = s;
  }
  const double done = detail::now_seconds();
  waiting_s_ += done - wait_start;
  if (first_submit_ >= 0) communication_s_ += done - first_submit_;
  first_submit_ = -1;
  pass_ = 0;
  started_.assign(started_.size(), false);
  if (!failed.ok()) throw Error(failed.with_context("DistributedOptimizer: gradient allreduce"));
  if (options_.compression == Compression::kFp16) {
    for (auto& e : pending_) {
      Tensor& grad = e->param->grad;
      if (grad.is_cuda()) {
        detail::gpu(grad.device())
            .from_half(e->gpu_half.data<std::uint16_t>(), grad.data(), grad.size());
        continue;
      }
      f16_to_f32(e->half.data(), grad.data(), e->half.size());
    }
  }
  inner_.step();
  inner_.zero_grad();
}

void DistributedOptimizer::reset() {
  for (auto& e : pending_) {
    if (e->handle.valid()) (void)e->handle.status();
    e->handle = Handle();
  }
  first_submit_ = -1;
  pass_ = 0;
  started_.assign(started_.size(), false);
  inner_.zero_grad();
}

std::size_t DistributedOptimizer::workspace_bytes() const {
  std::size_t bytes = 0;
  for (const auto& e : pending_) {
    bytes += e->half.size() * sizeof(std::uint16_t) + e->gpu_half.capacity();
  }
  return bytes;
}

void broadcast_parameters(Sequential& model, int root, ProcessSet process_set) {
  std::vector<Handle> handles;
  for (Parameter* p : model.parameters()) {
    synchronize(p->value.device());  // the runtime reads the values on streams of its own
    handles.push_back(broadcast_async("param." + p->name, p->value.view(), root, process_set));
  }
  for (Handle& h : handles) h.wait();
}

void add_to_state(elastic::State& state, Sequential& model, Optimizer& optimizer) {
  auto host_only = [](const std::string& name, int device) {
    if (device != kCpuDevice)
      throw Error(invalid_argument(
          fmt::format("add_to_state: '{}' is on cuda:{}; an elastic state holds host tensors only",
                      name, device)));
  };
  for (Parameter* p : model.parameters()) {
    host_only(p->name, p->value.device());
    state.add("param." + p->name, p->value.data(), p->value.bytes());
  }
  for (const Optimizer::StateBuffer& b : optimizer.state()) {
    host_only(b.name, b.device);
    state.add("optimizer." + b.name, b.data, b.bytes);
  }
}

}  // namespace hoop::train
