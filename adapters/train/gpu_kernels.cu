// The training core's CUDA kernels: the arithmetic of the CPU layers, loss and optimizers,
// element for element.
//
// Where the CPU adds up a sequence (bias gradients, col2im's overlapping taps, the loss's rows)
// a thread here adds the same terms in the same order, and hoop_train compiles this file with
// --fmad=false, so that no multiply-add is fused where the CPU rounds twice: elementwise
// kernels, the optimizers and these sums give the CPU's bits. What differs is cuBLAS's
// summation order inside GEMMs, max-pool gradients of overlapping windows (atomicAdd), exp and
// log in the loss (CUDA's double functions are within an ulp of glibc's, not equal) and the
// dropout masks (a counter-based hash here, std::mt19937_64 on the CPU).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "gpu_kernels.h"

namespace hoop::train::detail::kernels {
namespace {

constexpr unsigned kThreads = 256;

// Grid-stride loops cover any count with at most 2^16 blocks.
unsigned blocks_for(std::size_t count) {
  return static_cast<unsigned>(std::min<std::size_t>((count + kThreads - 1) / kThreads, 1 << 16));
}

// Every launcher goes through here: nothing is launched for no work (a zero-block grid is
// a launch error).
template <class Kernel, class... Args>
void launch(cudaStream_t s, std::size_t count, Kernel kernel, Args... args) {
  if (count == 0) return;
  kernel<<<blocks_for(count), kThreads, 0, s>>>(count, args...);
}

#define HOOP_FOR_EACH(i, count)                                                         \
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < (count); \
       i += std::size_t{blockDim.x} * gridDim.x)

__global__ void fill_kernel(std::size_t count, float* p, float value) {
  HOOP_FOR_EACH(i, count) p[i] = value;
}

__global__ void broadcast_rows_kernel(std::size_t count, float* out, const float* row,
                                      std::int64_t cols) {
  HOOP_FOR_EACH(i, count) out[i] = row[i % cols];
}

// One thread per column, rows in order, as layers_dense.cc's loop adds them.
__global__ void add_column_sums_kernel(std::size_t cols, float* sums, const float* m,
                                       std::int64_t rows) {
  HOOP_FOR_EACH(j, cols) {
    float acc = sums[j];
    for (std::int64_t r = 0; r < rows; ++r) acc += m[r * cols + j];
    sums[j] = acc;
  }
}

__global__ void relu_kernel(std::size_t count, const float* in, float* out, std::uint8_t* mask) {
  HOOP_FOR_EACH(i, count) {
    const float x = in[i];
    out[i] = x < 0.0f ? 0.0f : x;  // std::max(x, 0.0f), NaN passing through as there
    if (mask != nullptr) mask[i] = x > 0.0f;
  }
}

// SplitMix64's finalizer: a bijection of 64-bit words whose outputs look independent.
__device__ std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Element i of call `call` draws from (seed, call, i) alone, so masks are the same on any grid
// and in any run.
__global__ void dropout_kernel(std::size_t count, const float* in, float* out, std::uint8_t* keep,
                               float p, std::uint64_t seed, std::uint64_t call) {
  const float scale = 1.0f / (1.0f - p);
  const std::uint64_t stream = mix(seed ^ (call * 0x9E3779B97F4A7C15ull));
  HOOP_FOR_EACH(i, count) {
    const float u = static_cast<float>(mix(stream + i) >> 40) * 0x1p-24f;  // [0, 1)
    const bool k = u >= p;
    keep[i] = k;
    out[i] = k ? in[i] * scale : 0.0f;
  }
}

__global__ void masked_scale_kernel(std::size_t count, const float* grad_out,
                                    const std::uint8_t* mask, float scale, float* grad_in) {
  HOOP_FOR_EACH(i, count) grad_in[i] = mask[i] ? grad_out[i] * scale : 0.0f;
}

// One thread per column entry: tap (c, ki, kj) of output position p of sample s.
__global__ void im2col_kernel(std::size_t total, const float* images, std::int64_t count,
                              std::int64_t channels, Window w, float* columns) {
  const std::int64_t plane = w.out_height * w.out_width;
  const std::int64_t ld = count * plane;
  HOOP_FOR_EACH(e, total) {
    const std::int64_t row = static_cast<std::int64_t>(e) / ld;
    const std::int64_t col = static_cast<std::int64_t>(e) % ld;
    const std::int64_t s = col / plane, p = col % plane;
    const std::int64_t c = row / (w.kernel * w.kernel);
    const std::int64_t ki = row / w.kernel % w.kernel, kj = row % w.kernel;
    const std::int64_t ih = p / w.out_width * w.stride - w.padding + ki;
    const std::int64_t iw = p % w.out_width * w.stride - w.padding + kj;
    const bool inside = ih >= 0 && ih < w.height && iw >= 0 && iw < w.width;
    columns[e] = inside ? images[((s * channels + c) * w.height + ih) * w.width + iw] : 0.0f;
  }
}

// One thread per input pixel, gathering the taps that read it in (ki, kj) order: the order in
// which layers_conv.cc's col2im adds them, and no atomics.
__global__ void col2im_kernel(std::size_t total, const float* columns, std::int64_t count,
                              std::int64_t channels, Window w, float* images) {
  const std::int64_t plane = w.out_height * w.out_width;
  const std::int64_t ld = count * plane;
  HOOP_FOR_EACH(e, total) {
    const std::int64_t iw = static_cast<std::int64_t>(e) % w.width;
    const std::int64_t ih = static_cast<std::int64_t>(e) / w.width % w.height;
    const std::int64_t c = static_cast<std::int64_t>(e) / (w.width * w.height) % channels;
    const std::int64_t s = static_cast<std::int64_t>(e) / (w.width * w.height * channels);
    float acc = 0.0f;
    for (std::int64_t ki = 0; ki < w.kernel; ++ki) {
      const std::int64_t dh = ih + w.padding - ki;  // oh * stride
      if (dh < 0 || dh % w.stride != 0 || dh / w.stride >= w.out_height) continue;
      for (std::int64_t kj = 0; kj < w.kernel; ++kj) {
        const std::int64_t dw = iw + w.padding - kj;
        if (dw < 0 || dw % w.stride != 0 || dw / w.stride >= w.out_width) continue;
        const std::int64_t row = (c * w.kernel + ki) * w.kernel + kj;
        acc += columns[row * ld + s * plane + dh / w.stride * w.out_width + dw / w.stride];
      }
    }
    images[e] += acc;
  }
}

__global__ void add_channel_bias_kernel(std::size_t total, const float* products, const float* bias,
                                        std::int64_t count, std::int64_t channels,
                                        std::int64_t plane, float* out) {
  HOOP_FOR_EACH(e, total) {
    const std::int64_t p = static_cast<std::int64_t>(e) % plane;
    const std::int64_t o = static_cast<std::int64_t>(e) / plane % channels;
    const std::int64_t s = static_cast<std::int64_t>(e) / (plane * channels);
    out[e] = products[o * count * plane + s * plane + p] + bias[o];
  }
}

__global__ void gather_channels_kernel(std::size_t total, const float* grad, std::int64_t count,
                                       std::int64_t channels, std::int64_t plane, float* products) {
  HOOP_FOR_EACH(e, total) {
    const std::int64_t p = static_cast<std::int64_t>(e) % plane;
    const std::int64_t o = static_cast<std::int64_t>(e) / plane % channels;
    const std::int64_t s = static_cast<std::int64_t>(e) / (plane * channels);
    products[o * count * plane + s * plane + p] = grad[e];
  }
}

// sums[s, o] = the sum of plane (s, o) of grad, in order from a float zero, as on the CPU.
__global__ void plane_sums_kernel(std::size_t planes, const float* grad, std::int64_t plane,
                                  float* sums) {
  HOOP_FOR_EACH(i, planes) {
    float sum = 0.0f;
    for (std::int64_t p = 0; p < plane; ++p) sum += grad[i * plane + p];
    sums[i] = sum;
  }
}

// bias_grad[o] += sums[s, o] for s in order.
__global__ void add_sample_sums_kernel(std::size_t channels, const float* sums, std::int64_t count,
                                       float* bias_grad) {
  HOOP_FOR_EACH(o, channels) {
    float acc = bias_grad[o];
    for (std::int64_t s = 0; s < count; ++s) acc += sums[s * channels + o];
    bias_grad[o] = acc;
  }
}

__global__ void max_pool_kernel(std::size_t total, const float* in, std::int64_t height,
                                std::int64_t width, std::int64_t kernel, std::int64_t stride,
                                std::int64_t out_height, std::int64_t out_width, float* out,
                                std::uint32_t* argmax) {
  HOOP_FOR_EACH(o, total) {
    const std::int64_t ow = static_cast<std::int64_t>(o) % out_width;
    const std::int64_t oh = static_cast<std::int64_t>(o) / out_width % out_height;
    const std::int64_t pl = static_cast<std::int64_t>(o) / (out_width * out_height);
    const float* plane = in + pl * height * width;
    std::int64_t best = oh * stride * width + ow * stride;
    for (std::int64_t ki = 0; ki < kernel; ++ki) {
      const std::int64_t row = (oh * stride + ki) * width + ow * stride;
      for (std::int64_t kj = 0; kj < kernel; ++kj) {
        if (plane[row + kj] > plane[best]) best = row + kj;
      }
    }
    out[o] = plane[best];
    if (argmax != nullptr) argmax[o] = static_cast<std::uint32_t>(best);
  }
}

// Windows that do not overlap (stride >= kernel, as in LeNet-5) send at most one term to each
// input, so the atomics add to zero exactly; overlapping ones add in any order.
__global__ void max_pool_backward_kernel(std::size_t total, const float* grad_out,
                                         const std::uint32_t* argmax, std::int64_t in_plane,
                                         std::int64_t out_plane, float* grad_in) {
  HOOP_FOR_EACH(o, total) {
    const std::int64_t pl = static_cast<std::int64_t>(o) / out_plane;
    atomicAdd(grad_in + pl * in_plane + argmax[o], grad_out[o]);
  }
}

// One thread per row, loss.cc's arithmetic: shifted by the row maximum, sums in double.
__global__ void softmax_cross_entropy_kernel(std::size_t rows, const float* logits,
                                             const int* labels, std::int64_t classes, float* grad,
                                             double* row_loss, std::uint8_t* row_correct) {
  const float inv_n = 1.0f / static_cast<float>(rows);
  HOOP_FOR_EACH(r, rows) {
    const float* z = logits + r * classes;
    std::int64_t first_max = 0;
    for (std::int64_t c = 1; c < classes; ++c) {
      if (z[c] > z[first_max]) first_max = c;
    }
    const float top = z[first_max];
    const int label = labels[r];
    if (row_correct != nullptr) row_correct[r] = first_max == label;
    if (row_loss == nullptr && grad == nullptr) continue;
    double sum = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) sum += exp(static_cast<double>(z[c] - top));
    if (row_loss != nullptr) row_loss[r] = log(sum) - static_cast<double>(z[label] - top);
    if (grad != nullptr) {
      float* g = grad + r * classes;
      for (std::int64_t c = 0; c < classes; ++c) {
        g[c] = static_cast<float>(exp(static_cast<double>(z[c] - top)) / sum) * inv_n;
      }
      g[label] -= inv_n;
    }
  }
}

__global__ void sgd_kernel(std::size_t count, float* w, const float* g, float* velocity, float lr,
                           float momentum, float weight_decay) {
  HOOP_FOR_EACH(i, count) {
    if (velocity == nullptr) {
      w[i] -= lr * (g[i] + weight_decay * w[i]);
    } else {
      const float d = g[i] + weight_decay * w[i];
      velocity[i] = momentum * velocity[i] + d;
      w[i] -= lr * velocity[i];
    }
  }
}

__global__ void adam_kernel(std::size_t count, float* w, const float* g, float* m, float* v,
                            float step_size, float beta1, float beta2, float eps,
                            float weight_decay, float sqrt_c2) {
  HOOP_FOR_EACH(i, count) {
    const float d = g[i] + weight_decay * w[i];
    m[i] = beta1 * m[i] + (1.0f - beta1) * d;
    v[i] = beta2 * v[i] + (1.0f - beta2) * d * d;
    w[i] -= step_size * m[i] / (sqrtf(v[i]) / sqrt_c2 + eps);
  }
}

__global__ void to_half_kernel(std::size_t count, const float* src, float scale,
                               std::uint16_t* half) {
  HOOP_FOR_EACH(i, count) half[i] = __half_as_ushort(__float2half_rn(src[i] * scale));
}

__global__ void from_half_kernel(std::size_t count, const std::uint16_t* half, float* dst) {
  HOOP_FOR_EACH(i, count) dst[i] = __half2float(__ushort_as_half(half[i]));
}

#undef HOOP_FOR_EACH

}  // namespace

void fill(cudaStream_t s, float* p, std::size_t count, float value) {
  launch(s, count, fill_kernel, p, value);
}

void broadcast_rows(cudaStream_t s, float* out, const float* row, std::int64_t rows,
                    std::int64_t cols) {
  launch(s, static_cast<std::size_t>(rows * cols), broadcast_rows_kernel, out, row, cols);
}

void add_column_sums(cudaStream_t s, float* sums, const float* m, std::int64_t rows,
                     std::int64_t cols) {
  launch(s, static_cast<std::size_t>(cols), add_column_sums_kernel, sums, m, rows);
}

void relu(cudaStream_t s, const float* in, float* out, std::uint8_t* mask, std::size_t count) {
  launch(s, count, relu_kernel, in, out, mask);
}

void dropout(cudaStream_t s, const float* in, float* out, std::uint8_t* keep, std::size_t count,
             float p, std::uint64_t seed, std::uint64_t call) {
  launch(s, count, dropout_kernel, in, out, keep, p, seed, call);
}

void masked_scale(cudaStream_t s, const float* grad_out, const std::uint8_t* mask, float scale,
                  float* grad_in, std::size_t count) {
  launch(s, count, masked_scale_kernel, grad_out, mask, scale, grad_in);
}

void im2col(cudaStream_t s, const float* images, std::int64_t count, std::int64_t channels,
            const Window& w, float* columns) {
  const std::int64_t total = channels * w.kernel * w.kernel * count * w.out_height * w.out_width;
  launch(s, static_cast<std::size_t>(total), im2col_kernel, images, count, channels, w, columns);
}

void col2im(cudaStream_t s, const float* columns, std::int64_t count, std::int64_t channels,
            const Window& w, float* images) {
  const std::int64_t total = count * channels * w.height * w.width;
  launch(s, static_cast<std::size_t>(total), col2im_kernel, columns, count, channels, w, images);
}

void add_channel_bias(cudaStream_t s, const float* products, const float* bias, std::int64_t count,
                      std::int64_t channels, std::int64_t plane, float* out) {
  launch(s, static_cast<std::size_t>(count * channels * plane), add_channel_bias_kernel, products,
         bias, count, channels, plane, out);
}

void gather_channels(cudaStream_t s, const float* grad, std::int64_t count, std::int64_t channels,
                     std::int64_t plane, float* products, float* bias_grad, float* sums) {
  launch(s, static_cast<std::size_t>(count * channels * plane), gather_channels_kernel, grad, count,
         channels, plane, products);
  launch(s, static_cast<std::size_t>(count * channels), plane_sums_kernel, grad, plane, sums);
  launch(s, static_cast<std::size_t>(channels), add_sample_sums_kernel, sums, count, bias_grad);
}

void max_pool(cudaStream_t s, const float* in, std::int64_t planes, std::int64_t height,
              std::int64_t width, std::int64_t kernel, std::int64_t stride, std::int64_t out_height,
              std::int64_t out_width, float* out, std::uint32_t* argmax) {
  launch(s, static_cast<std::size_t>(planes * out_height * out_width), max_pool_kernel, in, height,
         width, kernel, stride, out_height, out_width, out, argmax);
}

void max_pool_backward(cudaStream_t s, const float* grad_out, const std::uint32_t* argmax,
                       std::int64_t planes, std::int64_t in_plane, std::int64_t out_plane,
                       float* grad_in) {
  launch(s, static_cast<std::size_t>(planes * out_plane), max_pool_backward_kernel, grad_out,
         argmax, in_plane, out_plane, grad_in);
}

void softmax_cross_entropy(cudaStream_t s, const float* logits, const int* labels,
                           std::int64_t rows, std::int64_t classes, float* grad, double* row_loss,
                           std::uint8_t* row_correct) {
  launch(s, static_cast<std::size_t>(rows), softmax_cross_entropy_kernel, logits, labels, classes,
         grad, row_loss, row_correct);
}

void sgd_step(cudaStream_t s, float* w, const float* g, float* velocity, std::size_t count,
              float lr, float momentum, float weight_decay) {
  launch(s, count, sgd_kernel, w, g, velocity, lr, momentum, weight_decay);
}

void adam_step(cudaStream_t s, float* w, const float* g, float* m, float* v, std::size_t count,
               float step_size, float beta1, float beta2, float eps, float weight_decay,
               float sqrt_c2) {
  launch(s, count, adam_kernel, w, g, m, v, step_size, beta1, beta2, eps, weight_decay, sqrt_c2);
}

void to_half(cudaStream_t s, const float* src, float scale, std::uint16_t* half,
             std::size_t count) {
  launch(s, count, to_half_kernel, src, scale, half);
}

void from_half(cudaStream_t s, const std::uint16_t* half, float* dst, std::size_t count) {
  launch(s, count, from_half_kernel, half, dst);
}

}  // namespace hoop::train::detail::kernels
