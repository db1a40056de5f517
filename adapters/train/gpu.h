// The training core's GPU backend: what layers, the loss, the optimizers and Tensor ask of a
// CUDA device. Internal to hoop_train; no CUDA header is needed to call it.
//
// Gpu is an interface with one implementation (gpu_cuda.cc and gpu_kernels.cu, built with
// CUDA) so that a build without CUDA defines no fallback per kernel: there gpu() itself throws
// (gpu_none.cc), and no CUDA tensor can exist to reach the rest.
//
// Every call is queued on the device's one stream, in order, so that kernels see what earlier
// ones wrote without any synchronization; only download() and synchronize() wait. Pointers are
// device memory of that device unless a parameter says host. The kernels compute what the CPU
// code beside each caller computes, in the same order where the CPU adds up a sequence (bias
// gradients, col2im, the optimizers), so that the two differ only where cuBLAS and OpenBLAS
// round differently (see gpu_kernels.cu).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hoop/train.h"
#include "window.h"

namespace hoop::train::detail {

class Gpu {
 public:
  virtual ~Gpu() = default;

  // Memory, ordered on the stream: an allocation is usable by work queued after it, and a
  // release takes effect after the work queued before it.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
  /// Host to device; `src` may be reused once this returns.
  virtual void upload(void* dst, const void* src, std::size_t bytes) = 0;
  /// Device to host; the bytes have arrived when this returns.
  virtual void download(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void fill(float* p, std::size_t count, float value) = 0;
  /// Waits for everything queued so far.
  virtual void synchronize() = 0;

  /// blas::gemm's contract (row-major, op(A) m x k, op(B) k x n, C m x n) through cuBLAS.
  virtual void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                    float beta, float* c, std::int64_t ldc) = 0;

  // Dense layers.
  /// out[r, j] = row[j] for r < rows, j < cols.
  virtual void broadcast_rows(float* out, const float* row, std::int64_t rows,
                              std::int64_t cols) = 0;
  /// sums[j] += m[r, j] for r = 0, 1, ... in order.
  virtual void add_column_sums(float* sums, const float* m, std::int64_t rows,
                               std::int64_t cols) = 0;
  /// out = max(in, 0); mask (when not null) = in > 0.
  virtual void relu(const float* in, float* out, std::uint8_t* mask, std::size_t count) = 0;
  /// keep[i] = hash(seed, call, i) in [0, 1) >= p; out = keep ? in / (1 - p) : 0.
  virtual void dropout(const float* in, float* out, std::uint8_t* keep, std::size_t count, float p,
                       std::uint64_t seed, std::uint64_t call) = 0;
  /// grad_in = mask ? grad_out * scale : 0.
  virtual void masked_scale(const float* grad_out, const std::uint8_t* mask, float scale,
                            float* grad_in, std::size_t count) = 0;

  // Convolution over `count` samples at once; columns are [taps, count * plane] with row
  // stride count * plane, as layers_conv.cc lays them out.
  virtual void im2col(const float* images, std::int64_t count, std::int64_t channels,
                      const Window& w, float* columns) = 0;
  /// images (zeroed by the caller) += the adjoint of im2col.
  virtual void col2im(const float* columns, std::int64_t count, std::int64_t channels,
                      const Window& w, float* images) = 0;
  /// out[s, o, p] = products[o, s * plane + p] + bias[o].
  virtual void add_channel_bias(const float* products, const float* bias, std::int64_t count,
                                std::int64_t channels, std::int64_t plane, float* out) = 0;
  /// products[o, s * plane + p] = grad[s, o, p]; bias_grad[o] += (sum over p of grad[s, o, p])
  /// for s = 0, 1, ... in order.
  virtual void gather_channels(const float* grad, std::int64_t count, std::int64_t channels,
                               std::int64_t plane, float* products, float* bias_grad) = 0;
  /// Max pooling of `planes` planes [height, width]; argmax (when not null) gets each output's
  /// index within its input plane (the first maximum).
  virtual void max_pool(const float* in, std::int64_t planes, std::int64_t height,
                        std::int64_t width, std::int64_t kernel, std::int64_t stride,
                        std::int64_t out_height, std::int64_t out_width, float* out,
                        std::uint32_t* argmax) = 0;
  /// grad_in (zeroed by the caller) [argmax[o]] += grad_out[o], plane by plane.
  virtual void max_pool_backward(const float* grad_out, const std::uint32_t* argmax,
                                 std::int64_t planes, std::int64_t in_plane, std::int64_t out_plane,
                                 float* grad_in) = 0;

  /// Softmax cross-entropy of logits [labels.size(), classes] against host labels: row r's
  /// loss (log-sum-exp minus the label's logit, in double) into (*row_loss)[r] and whether its
  /// first maximum is the label into (*row_correct)[r] (host vectors, each when not null),
  /// and d(mean loss)/d(logits) into grad when not null.
  virtual void softmax_cross_entropy(const float* logits, const std::vector<int>& labels,
                                     std::int64_t classes, float* grad,
                                     std::vector<double>* row_loss,
                                     std::vector<std::uint8_t>* row_correct) = 0;

  // Optimizers, elementwise as in optimizers.cc.
  /// velocity null: w -= lr * (g + wd * w); else v = momentum * v + (g + wd * w); w -= lr * v.
  virtual void sgd_step(float* w, const float* g, float* velocity, std::size_t count, float lr,
                        float momentum, float weight_decay) = 0;
  /// g' = g + wd * w; m = b1 m + (1 - b1) g'; v = b2 v + (1 - b2) g'^2;
  /// w -= step_size * m / (sqrt(v) / sqrt_c2 + eps).
  virtual void adam_step(float* w, const float* g, float* m, float* v, std::size_t count,
                         float step_size, float beta1, float beta2, float eps, float weight_decay,
                         float sqrt_c2) = 0;

  // fp16 gradient compression.
  /// half[i] = f16(src[i] * scale), rounded to nearest even.
  virtual void to_half(const float* src, float scale, std::uint16_t* half, std::size_t count) = 0;
  virtual void from_half(const std::uint16_t* half, float* dst, std::size_t count) = 0;
};

/// The backend of CUDA device `device`, created on first use and kept for the process's
/// lifetime. Throws hoop::Error naming the device and why when it is not usable.
Gpu& gpu(int device);

/// The error for a device that gpu() cannot serve: "cuda:N is not usable: <why>".
Error unusable_device(int device, const std::string& why);

/// Grow-only device scratch of one layer (masks, argmax, im2col columns), released on
/// destruction.
class GpuBuffer {
 public:
  GpuBuffer() = default;
  GpuBuffer(const GpuBuffer&) = delete;
  GpuBuffer& operator=(const GpuBuffer&) = delete;
  ~GpuBuffer() { reset(); }

  /// At least `bytes` bytes on `device`; the contents are lost when it has to grow or move.
  template <class T = void>
  T* reserve(int device, std::size_t bytes) {
    if (device != device_ || bytes > capacity_) {
      reset();
      data_ = gpu(device).allocate(bytes);
      device_ = device;
      capacity_ = bytes;
    }
    return static_cast<T*>(data_);
  }
  template <class T = void>
  T* data() const {
    return static_cast<T*>(data_);
  }
  std::size_t capacity() const { return capacity_; }

 private:
  void reset() noexcept {
    if (data_ != nullptr) gpu(device_).release(data_);
    data_ = nullptr;
    capacity_ = 0;
  }
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
  int device_ = kCpuDevice;
};

}  // namespace hoop::train::detail
