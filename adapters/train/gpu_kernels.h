// The training core's CUDA kernels (gpu_kernels.cu), one launcher each, queued on the stream
// they are given. gpu_cuda.cc checks the launch and documents what each computes (gpu.h);
// shapes are already checked by the callers. Internal to hoop_train.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "window.h"

namespace hoop::train::detail::kernels {

void fill(cudaStream_t s, float* p, std::size_t count, float value);
void broadcast_rows(cudaStream_t s, float* out, const float* row, std::int64_t rows,
                    std::int64_t cols);
void add_column_sums(cudaStream_t s, float* sums, const float* m, std::int64_t rows,
                     std::int64_t cols);
void relu(cudaStream_t s, const float* in, float* out, std::uint8_t* mask, std::size_t count);
void dropout(cudaStream_t s, const float* in, float* out, std::uint8_t* keep, std::size_t count,
             float p, std::uint64_t seed, std::uint64_t call);
void masked_scale(cudaStream_t s, const float* grad_out, const std::uint8_t* mask, float scale,
                  float* grad_in, std::size_t count);
void im2col(cudaStream_t s, const float* images, std::int64_t count, std::int64_t channels,
            const Window& w, float* columns);
void col2im(cudaStream_t s, const float* columns, std::int64_t count, std::int64_t channels,
            const Window& w, float* images);
void add_channel_bias(cudaStream_t s, const float* products, const float* bias, std::int64_t count,
                      std::int64_t channels, std::int64_t plane, float* out);
/// `sums` is scratch of count * channels floats.
void gather_channels(cudaStream_t s, const float* grad, std::int64_t count, std::int64_t channels,
                     std::int64_t plane, float* products, float* bias_grad, float* sums);
void max_pool(cudaStream_t s, const float* in, std::int64_t planes, std::int64_t height,
              std::int64_t width, std::int64_t kernel, std::int64_t stride, std::int64_t out_height,
              std::int64_t out_width, float* out, std::uint32_t* argmax);
void max_pool_backward(cudaStream_t s, const float* grad_out, const std::uint32_t* argmax,
                       std::int64_t planes, std::int64_t in_plane, std::int64_t out_plane,
                       float* grad_in);
/// Row r of logits [rows, classes] against labels[r]: row_loss[r] and row_correct[r] (each
/// when not null) and grad (when not null).
void softmax_cross_entropy(cudaStream_t s, const float* logits, const int* labels,
                           std::int64_t rows, std::int64_t classes, float* grad, double* row_loss,
                           std::uint8_t* row_correct);
void sgd_step(cudaStream_t s, float* w, const float* g, float* velocity, std::size_t count,
              float lr, float momentum, float weight_decay);
void adam_step(cudaStream_t s, float* w, const float* g, float* m, float* v, std::size_t count,
               float step_size, float beta1, float beta2, float eps, float weight_decay,
               float sqrt_c2);
void to_half(cudaStream_t s, const float* src, float scale, std::uint16_t* half, std::size_t count);
void from_half(cudaStream_t s, const std::uint16_t* half, float* dst, std::size_t count);

}  // namespace hoop::train::detail::kernels
