/// @file
/// hoop's bundled training core: a small neural-network library, enough to train an MLP or
/// LeNet-5 on Fashion-MNIST data-parallel with hoop's runtime and no framework.
///
/// Tensors are dense row-major float32, on the CPU or (in a build with CUDA) on a CUDA device.
/// Layers, the loss and the optimizers run where their tensors are: a model moved to a device
/// with Sequential::to() takes inputs on that device. A Sequential model runs its layers
/// forward, caching what backward needs; backward accumulates (+=) into each parameter's
/// gradient and calls a hook after each layer, so a DistributedOptimizer can start that layer's
/// allreduce while the layers before it are still computing. Matrix products go through OpenBLAS
/// on the CPU and cuBLAS on a GPU; a device's work is queued on one stream of its own.
///
/// Errors: bad arguments (shape mismatches, unknown names, missing or corrupt data files)
/// throw hoop::Error naming the layer, tensor or file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hoop/hoop.h"

namespace hoop::elastic {
class State;
}

/// The bundled training core: layers, models, optimizers, data and data parallelism.
namespace hoop::train {

namespace detail {

/// Float32 storage on a CUDA device, owned by a Tensor: copying copies the elements (queued on
/// the device's stream), moving moves the allocation. Default-constructed, it is empty and on
/// the CPU (kCpuDevice), holding nothing.
class DeviceStorage {
 public:
  DeviceStorage() = default;
  /// `count` zeroed floats on CUDA device `device`; throws hoop::Error naming the reason when
  /// the device is not usable (no CUDA in this build, no driver or device, a bad index).
  DeviceStorage(int device, std::size_t count);
  DeviceStorage(const DeviceStorage& other);
  DeviceStorage& operator=(const DeviceStorage& other);
  DeviceStorage(DeviceStorage&& other) noexcept;
  DeviceStorage& operator=(DeviceStorage&& other) noexcept;
  ~DeviceStorage();

  float* data() const { return data_; }
  std::size_t size() const { return size_; }
  int device() const { return device_; }

 private:
  float* data_ = nullptr;
  std::size_t size_ = 0;
  int device_ = kCpuDevice;
};

}  // namespace detail

/// A dense row-major float32 tensor that owns its storage, on the CPU or on a CUDA device.
class Tensor {
 public:
  /// An empty CPU tensor: no dimensions, no elements.
  Tensor() = default;
  /// A tensor of the given shape, filled with zeros, on `device` (kCpuDevice or a CUDA device
  /// index). Throws on a negative dimension, and for a CUDA device that is not usable, naming
  /// why (this build has no CUDA, no driver or device, an index out of range).
  explicit Tensor(std::vector<std::int64_t> shape, int device = kCpuDevice);

  /// The dimensions, outermost first.
  const std::vector<std::int64_t>& shape() const { return shape_; }
  /// Dimension i (negative i counts from the end).
  std::int64_t dim(int i) const;
  /// kCpuDevice, or the CUDA device holding the elements.
  int device() const { return storage_.device(); }
  /// Whether the elements live on a CUDA device.
  bool is_cuda() const { return storage_.device() != kCpuDevice; }
  /// The number of elements.
  std::size_t size() const { return is_cuda() ? storage_.size() : data_.size(); }
  /// size() * sizeof(float).
  std::size_t bytes() const { return size() * sizeof(float); }
  /// The elements: host memory on the CPU, device memory on a CUDA device.
  float* data() { return is_cuda() ? storage_.data() : data_.data(); }
  /// The elements, read-only: host memory on the CPU, device memory on a CUDA device.
  const float* data() const { return is_cuda() ? storage_.data() : data_.data(); }
  /// Element i of a CPU tensor (a CUDA tensor's elements are reached through to()).
  float& operator[](std::size_t i) { return data_[i]; }
  /// Element i of a CPU tensor, by value.
  float operator[](std::size_t i) const { return data_[i]; }

  /// Sets every element to v.
  void fill(float v);
  /// A copy on `device` (kCpuDevice or a CUDA device index). A copy to the CPU has arrived
  /// when this returns; throws as the constructor does for an unusable device.
  Tensor to(int device) const;
  /// The same elements under another shape with the same element count (a copy).
  Tensor reshaped(std::vector<std::int64_t> shape) const;
  /// Changes the shape in place; the element count must not change.
  void reshape(std::vector<std::int64_t> shape);
  /// A view for hoop's runtime (f32, this shape, this device; a device pointer for a CUDA
  /// tensor). Work queued on the device's stream may still be writing the elements: the
  /// training core synchronizes before it hands a view to the runtime.
  hoop::Tensor view();
  /// "[32, 1, 28, 28]".
  std::string shape_string() const;

 private:
  std::vector<std::int64_t> shape_;
  std::vector<float> data_;        // a CPU tensor's elements
  detail::DeviceStorage storage_;  // a CUDA tensor's elements
};

/// The device that "cpu", "cuda" or "cuda:N" names: kCpuDevice, local_rank % (the number of
/// usable CUDA devices), or N. Throws hoop::Error naming `spec` and the reason when no CUDA
/// device is usable (hoop::device's unavailable reason: a build without CUDA, no driver or
/// device), when N is out of range, or for any other spelling.
int parse_device(const std::string& spec, int local_rank);
/// Waits until the work queued on CUDA device `device`'s stream by the training core has
/// finished (nothing to wait for on the CPU).
void synchronize(int device);

/// A trainable tensor and its gradient (same shape). Names are unique within a model
/// ("3.linear.weight"); data-parallel ranks use them as the runtime's tensor names.
struct Parameter {
  std::string name;  ///< unique within the model ("3.linear.weight")
  Tensor value;      ///< the trainable values
  Tensor grad;       ///< the gradient of the loss with respect to value
};

/// One layer. forward() caches what backward() needs when `training` is true; backward()
/// takes the gradient of the loss with respect to the layer's output, adds the gradients of
/// its parameters into Parameter::grad, and returns the gradient with respect to its input.
class Layer {
 public:
  virtual ~Layer() = default;
  /// The layer's output for `input`; caches what backward() needs when `training`.
  virtual Tensor forward(const Tensor& input, bool training) = 0;
  /// The gradient with respect to the input of the last training forward(), from the gradient
  /// with respect to its output; adds the parameters' gradients into Parameter::grad.
  virtual Tensor backward(const Tensor& grad_output) = 0;
  /// The layer's parameters (empty for layers without any).
  virtual std::vector<Parameter*> parameters() { return {}; }
  /// "linear", "conv2d", ...
  virtual std::string kind() const = 0;
  /// Bytes cached by the last training forward() for backward() (activations, masks).
  virtual std::size_t activation_bytes() const { return 0; }
  /// Bytes of scratch buffers the layer keeps (im2col columns, ...).
  virtual std::size_t workspace_bytes() const { return 0; }
};

/// y = x W^T + b; input [N, in], output [N, out]. Kaiming-uniform initialisation as in
/// PyTorch's nn.Linear.
std::unique_ptr<Layer> linear(std::int64_t in_features, std::int64_t out_features,
                              std::mt19937_64& rng);
/// 2-D convolution; input [N, C, H, W], output [N, out_channels, H', W'] (square kernel,
/// stride, zero padding), through im2col and GEMM.
std::unique_ptr<Layer> conv2d(std::int64_t in_channels, std::int64_t out_channels,
                              std::int64_t kernel, std::int64_t stride, std::int64_t padding,
                              std::mt19937_64& rng);
/// Max pooling over kernel x kernel windows with the given stride; input [N, C, H, W].
std::unique_ptr<Layer> max_pool2d(std::int64_t kernel, std::int64_t stride);
/// max(x, 0), elementwise.
std::unique_ptr<Layer> relu();
/// [N, ...] -> [N, product of the rest].
std::unique_ptr<Layer> flatten();
/// Zeroes each element with probability p while training and scales the rest by 1/(1-p);
/// the identity in evaluation. Draws from its own generator seeded with `seed`.
std::unique_ptr<Layer> dropout(float p, std::uint64_t seed);

/// A stack of layers applied in order. Parameter names get the layer's index and kind as a
/// prefix ("0.conv2d.weight").
class Sequential {
 public:
  /// Appends a layer and names its parameters.
  void add(std::unique_ptr<Layer> layer);
  /// Moves every parameter (value and gradient) to `device`; forward() then takes inputs on
  /// that device. Build optimizers after the move: their state lives where the parameters do.
  void to(int device);
  /// Runs every layer forward.
  Tensor forward(const Tensor& input, bool training);
  /// Runs every layer backward, last first; after layer i has finished, calls
  /// on_layer_done(i) (when set), at which point that layer's gradients are final for this
  /// backward pass.
  void backward(const Tensor& grad_output,
                const std::function<void(std::size_t layer)>& on_layer_done = {});
  /// Every parameter, in layer order.
  std::vector<Parameter*> parameters();
  /// The parameters of layer i.
  std::vector<Parameter*> layer_parameters(std::size_t i);
  /// Sets every gradient to zero.
  void zero_grad();
  /// The number of layers.
  std::size_t layer_count() const { return layers_.size(); }
  /// Layer i (std::out_of_range past the last).
  Layer& layer(std::size_t i) { return *layers_.at(i); }
  /// The number of trainable scalars.
  std::size_t parameter_count();

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
};

/// A multilayer perceptron for [N, 1, 28, 28] (or [N, 784]) inputs: flatten, then Linear and
/// ReLU (and dropout when > 0) per hidden width, then Linear to `classes`.
Sequential make_mlp(const std::vector<std::int64_t>& hidden, std::int64_t classes, float dropout_p,
                    std::uint64_t seed);
/// LeNet-5 for [N, 1, 28, 28]: conv 5x5 (6, padding 2), ReLU, max-pool 2; conv 5x5 (16),
/// ReLU, max-pool 2; Linear 400-120, ReLU, Linear 120-84, ReLU, Linear 84-classes.
Sequential make_lenet5(std::int64_t classes, std::uint64_t seed);
/// make_mlp({256, 128}, 10, 0, seed) for "mlp", make_lenet5(10, seed) for "lenet5"; throws
/// hoop::Error naming the known models otherwise.
Sequential make_model(const std::string& name, std::uint64_t seed);

/// Mean softmax cross-entropy of logits [N, classes] against labels (N of them, each in
/// [0, classes)). Writes d(loss)/d(logits) into *grad when grad is not null (on the logits'
/// device; *grad is replaced when its shape or device differs).
float softmax_cross_entropy(const Tensor& logits, const std::vector<int>& labels, Tensor* grad);
/// The number of rows whose largest logit is at the label's index.
std::size_t count_correct(const Tensor& logits, const std::vector<int>& labels);

/// Updates parameters from their gradients, on the parameters' device.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// One update of every parameter from its current gradient.
  virtual void step() = 0;
  /// Sets every parameter's gradient to zero.
  void zero_grad();
  /// The parameters it updates.
  const std::vector<Parameter*>& parameters() const { return params_; }
  /// Bytes of per-parameter state (momentum, moments).
  virtual std::size_t state_bytes() const = 0;
  /// The optimizer's state, to checkpoint or to carry through an elastic reset: its buffers
  /// (momentum, moments; where the parameters are) and, for Adam, its step count.
  struct StateBuffer {
    std::string name;   ///< "sgd.momentum.0", "adam.m.0", "adam.t", ...
    void* data;         ///< its first byte, in the optimizer's memory
    std::size_t bytes;  ///< its length
    int device;         ///< kCpuDevice, or the CUDA device holding it
  };
  /// The buffers of its state (see StateBuffer); empty when it keeps none.
  virtual std::vector<StateBuffer> state() = 0;
  /// The learning rate.
  float learning_rate() const { return lr_; }
  /// Sets the learning rate of the next steps.
  void set_learning_rate(float lr) { lr_ = lr; }

 protected:
  /// An optimizer of `params` with learning rate `lr`, for subclasses.
  Optimizer(std::vector<Parameter*> params, float lr) : params_(std::move(params)), lr_(lr) {}
  /// The parameters it updates.
  std::vector<Parameter*> params_;
  /// The learning rate.
  float lr_;
};

/// SGD as in PyTorch: g += wd * w; v = momentum * v + g; w -= lr * v (v = g when momentum 0).
std::unique_ptr<Optimizer> sgd(std::vector<Parameter*> params, float lr, float momentum = 0,
                               float weight_decay = 0);
/// Adam as in PyTorch (L2 weight decay added to the gradient, bias-corrected moments).
std::unique_ptr<Optimizer> adam(std::vector<Parameter*> params, float lr, float beta1 = 0.9f,
                                float beta2 = 0.999f, float eps = 1e-8f, float weight_decay = 0);

/// Images [N, 1, 28, 28] scaled to [0, 1] and their labels.
struct Dataset {
  Tensor images;            ///< [N, 1, 28, 28], scaled to [0, 1]
  std::vector<int> labels;  ///< N class indices
  /// The number of examples, N.
  std::size_t size() const { return labels.size(); }
};

/// Where Debian's dataset-fashion-mnist puts the files: HOOP_DATA_DIR when set, else
/// /usr/share/datasets/fashion-mnist.
std::string default_data_dir();
/// Reads the training (train=true) or test split of Fashion-MNIST (or MNIST) from the IDX
/// files in `dir`, gzipped ("train-images-idx3-ubyte.gz") or not. Throws hoop::Error naming
/// the file and what is wrong when one is missing, truncated or malformed, or when images
/// and labels disagree.
Dataset load_fashion_mnist(const std::string& dir, bool train);

/// Hands each rank its share of every global batch. Each epoch draws one permutation of the
/// dataset from (seed, epoch), the same on every rank; global batch k is positions
/// [k*B*size, (k+1)*B*size) of it, and rank r gets the B examples at [r*B, (r+1)*B) within
/// it. The last incomplete global batch is dropped, so every rank runs the same number of
/// steps and one rank with batch B*size sees exactly what `size` ranks see together.
class ShardedLoader {
 public:
  /// Rank `rank`'s loader of `data` (which must outlive it) among `size` ranks, with
  /// `batch_per_rank` examples per step, at epoch 0; `shuffle` false keeps the dataset's order.
  /// Throws hoop::Error when an argument is out of range or a global batch does not fit.
  ShardedLoader(const Dataset& data, std::size_t batch_per_rank, int rank, int size,
                std::uint64_t seed, bool shuffle = true);
  /// Draws the epoch's permutation and rewinds to its position `skip`: the examples before it
  /// count as seen (an elastic job resuming its epoch with a new number of ranks).
  void start_epoch(int epoch, std::size_t skip = 0);
  /// The next batch of this rank: images [B, 1, 28, 28] and B labels; false after the last.
  bool next(Tensor& images, std::vector<int>& labels);
  /// Global batches (steps) in the epoch after its skipped examples.
  std::size_t steps_per_epoch() const;

 private:
  const Dataset& data_;
  std::size_t batch_;
  int rank_;
  int size_;
  std::uint64_t seed_;
  bool shuffle_;
  std::vector<std::uint32_t> order_;
  std::size_t skip_ = 0;
  std::size_t step_ = 0;
};

/// How gradients travel.
enum class Compression { kNone, kFp16 };

/// Settings of a DistributedOptimizer.
struct DistributedOptions {
  /// Local backward passes (micro-batches) per update: their gradients are summed locally,
  /// then averaged over the passes and the ranks in one allreduce per parameter.
  int backward_passes_per_step = 1;
  /// How the gradients travel.
  Compression compression = Compression::kNone;
  /// The ranks that average their gradients.
  ProcessSet process_set = kGlobalProcessSet;
  /// Prefix of the runtime's tensor names ("grad." + parameter name by default).
  std::string name_prefix = "grad.";
};

/// Wraps an optimizer for data parallelism, like Horovod's DistributedOptimizer: pass
/// hook() to Sequential::backward and each layer's gradients are averaged over the ranks
/// (through the runtime, so small ones are fused) as soon as that layer's backward is done;
/// step() waits for the averages and then updates. Requires hoop::init().
class DistributedOptimizer {
 public:
  /// Wraps `inner`, which updates `model`'s parameters (both must outlive it). Throws
  /// hoop::Error before hoop::init() or for backward_passes_per_step < 1.
  DistributedOptimizer(Sequential& model, Optimizer& inner, DistributedOptions options = {});
  ~DistributedOptimizer();
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;

  /// The callback for Sequential::backward: counts backward passes and, on the
  /// backward_passes_per_step-th, starts layer i's allreduces as soon as layer i is done.
  /// Throws hoop::Error on a pass beyond backward_passes_per_step without step().
  std::function<void(std::size_t layer)> hook();
  /// Waits for every gradient's average over the ranks and over the backward passes since the
  /// last step (starting any not yet started), updates the parameters and zeroes the
  /// gradients. Throws hoop::Error with the cause when an allreduce failed.
  void step();
  /// Abandons the step in progress: waits for its allreduces (successful or failed), forgets
  /// its backward passes and zeroes the gradients. For an elastic job's reset callback.
  void reset();
  /// Seconds step() spent blocked on allreduces since the last reset_timers() (exposed
  /// communication).
  double waiting_seconds() const { return waiting_s_; }
  /// Seconds from each step's first submission to its last completion, summed since the last
  /// reset_timers() (communication, overlapping backward).
  double communication_seconds() const { return communication_s_; }
  /// Sets waiting_seconds() and communication_seconds() back to 0.
  void reset_timers() { waiting_s_ = communication_s_ = 0; }
  /// Bytes of compression buffers.
  std::size_t workspace_bytes() const;

 private:
  struct Pending;
  void start_layer(std::size_t layer, int passes);
  Sequential& model_;
  Optimizer& inner_;
  DistributedOptions options_;
  int pass_ = 0;
  std::vector<std::unique_ptr<Pending>> pending_;
  std::vector<bool> started_;
  double first_submit_ = -1;
  double waiting_s_ = 0;
  double communication_s_ = 0;
};

/// How the workers of a data-parallel job combine their gradients: the two families the seed
/// study compares (Jäger and Igel, DIDL 2018).
enum class Strategy {
  kAllreduce,         ///< "allreduce": every rank averages every gradient (DistributedOptimizer)
  kParameterServer,   ///< "ps": a server rank applies the averaged gradients once all have pushed
  kParameterServerAsync,  ///< "ps-async": the server applies each worker's gradients on arrival
  kKvStore,           ///< "kvstore": each worker serves one shard of the parameters
};
/// The strategy a name above stands for; throws hoop::Error naming the known ones.
Strategy parse_strategy(const std::string& name);
/// "allreduce", "ps", "ps-async" or "kvstore".
std::string strategy_name(Strategy strategy);
/// Whether the strategy takes one rank of the job as its server (the job's last rank).
bool has_server(Strategy strategy);

/// Builds the optimizer of the parameters a server or a shard owner updates.
using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(std::vector<Parameter*>)>;

/// Parameter-server and sharded key-value-store training, over a Communicator of its own and
/// the point-to-point requests of hoop's transport (shared memory, TCP, ...). A worker pushes
/// its gradients after backward and pulls parameters back in step(); the optimizer runs where
/// the parameters are served (the server, or each shard's owner), averaging over the workers.
/// With ps and kvstore the parameters after a step are those of the allreduce strategy's
/// average (up to float32 rounding). CPU tensors only.
///
/// Failure: a worker or server that dies, or a push that does not come within the
/// communicator's timeout (HOOP_TIMEOUT_SECONDS), fails step() or serve() with hoop::Error
/// naming the rank; the rank that sees it first aborts the transport, so that every other
/// rank fails with the same cause instead of waiting.
class ParameterExchange {
 public:
  /// Collective over every rank of the job the environment describes (call it on all of
  /// them; hoop::init() need not run). With a server, the last rank serves and the others
  /// are workers 0..size-2 (at least one); with kvstore every rank is a worker. `model` holds
  /// the initial parameters, alike on every rank. Throws hoop::Error for kAllreduce, a job
  /// too small for the strategy, or CUDA parameters.
  ParameterExchange(Strategy strategy, Sequential& model, const OptimizerFactory& make_optimizer);
  ~ParameterExchange();
  ParameterExchange(const ParameterExchange&) = delete;
  ParameterExchange& operator=(const ParameterExchange&) = delete;

  /// The strategy it runs.
  Strategy strategy() const;
  /// Whether this rank is the server.
  bool is_server() const;
  /// This worker's index among the workers (its data shard), -1 on the server.
  int worker() const;
  /// The number of workers.
  int workers() const;
  /// Worker: pushes the model's gradients, pulls the parameters (ps, kvstore: those after this
  /// step's update; ps-async: the server's current ones) into the model, zeroes the gradients.
  void step();
  /// Server: serves `steps` pushes from every worker, then returns.
  void serve(std::size_t steps);
  /// Server of ps-async: counts[k] = updates whose gradients were computed on parameters k
  /// updates old (staleness); ps: every update at 0; empty on workers.
  const std::vector<std::uint64_t>& staleness() const;
  /// Seconds step() spent pushing and pulling (a worker's communication, none overlapped).
  double waiting_seconds() const;
  /// Sets waiting_seconds() back to 0.
  void reset_timers();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Sets the threads this process's matrix products may use (OpenBLAS; >= 1). With several
/// ranks on one host, cores / local ranks keeps them from oversubscribing the cores.
void set_compute_threads(int threads);
/// The threads matrix products use now.
int compute_threads();

/// Adds every parameter of `model` and the state of `optimizer` to an elastic job's state
/// (hoop/elastic.h), so that a reset restores and synchronises them. Host tensors only: throws
/// hoop::Error naming the first one on a CUDA device.
void add_to_state(elastic::State& state, Sequential& model, Optimizer& optimizer);

/// Copies every parameter of `model` from `root` to the other ranks of the set.
void broadcast_parameters(Sequential& model, int root, ProcessSet process_set = kGlobalProcessSet);

}  // namespace hoop::train
