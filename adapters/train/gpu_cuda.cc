// The training core's GPU backend on CUDA: one stream and one cuBLAS handle per device, memory
// from the stream-ordered allocator, and the kernels of gpu_kernels.cu.
//
// Allocations come from cudaMallocAsync's pool on the device's stream: layers allocate their
// outputs every step, and the pool makes that as cheap as reusing a buffer, without the
// device-wide synchronization of cudaFree. Since every kernel runs on the same stream, memory
// released after a kernel cannot be handed to a later one too early.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>

#include "gpu.h"
#include "gpu_kernels.h"
#include "hoop/hoop.h"

namespace hoop::train::detail {
namespace {

[[noreturn]] void fail_cuda(int device, const char* what, const std::string& error) {
  throw Error(io_error(fmt::format("cuda:{}: {} failed: {}", device, what, error)));
}

void check(int device, const char* what, cudaError_t error) {
  if (error != cudaSuccess) {
    (void)cudaGetLastError();  // clears a sticky launch error so the message is not repeated
    fail_cuda(device, what,
              fmt::format("{} ({})", cudaGetErrorName(error), cudaGetErrorString(error)));
  }
}

void check(int device, const char* what, cublasStatus_t status) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    fail_cuda(device, what,
              fmt::format("{} ({})", cublasGetStatusName(status), cublasGetStatusString(status)));
  }
}

class CudaGpu final : public Gpu {
 public:
  explicit CudaGpu(int device) : device_(device) {
    check(device_, "cudaSetDevice", cudaSetDevice(device_));
    check(device_, "cudaStreamCreateWithFlags",
          cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    check(device_, "cublasCreate", cublasCreate(&blas_));
    check(device_, "cublasSetStream", cublasSetStream(blas_, stream_));
    // Plain FP32 GEMMs (no TF32), so that results stay within float tolerance of OpenBLAS's.
    check(device_, "cublasSetMathMode", cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));
  }
  // The stream and handle live as long as the process: tensors in static storage may still
  // release memory while the program exits.

  void* allocate(std::size_t bytes) override {
    activate();
    void* p = nullptr;
    if (bytes > 0) check(device_, "cudaMallocAsync", cudaMallocAsync(&p, bytes, stream_));
    return p;
  }

  void release(void* p) noexcept override {
    // At exit the CUDA runtime may already be gone; there is nothing left to free then.
    if (p == nullptr || cudaSetDevice(device_) != cudaSuccess) return;
    if (cudaFreeAsync(p, stream_) != cudaSuccess) (void)cudaGetLastError();
  }

  void upload(void* dst, const void* src, std::size_t bytes) override {
    transfer(dst, src, bytes, cudaMemcpyHostToDevice);
  }

  void download(void* dst, const void* src, std::size_t bytes) override {
    transfer(dst, src, bytes, cudaMemcpyDeviceToHost);
    synchronize();
  }

  void copy(void* dst, const void* src, std::size_t bytes) override {
    transfer(dst, src, bytes, cudaMemcpyDeviceToDevice);
  }

  void fill(float* p, std::size_t count, float value) override {
    activate();
    kernels::fill(stream_, p, count, value);
    launched("fill");
  }

  void synchronize() override {
    activate();
    check(device_, "cudaStreamSynchronize", cudaStreamSynchronize(stream_));
  }

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a row-major matrix
  // is its transpose in column-major order: so cuBLAS gets B before A, n and m swapped, and
  // the same transpose flags and leading dimensions.
  void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
            float* c, std::int64_t ldc) override {
    if (m == 0 || n == 0) return;
    activate();
    check(device_, "cublasSgemm",
          cublasSgemm(blas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                      trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                      static_cast<int>(k), &alpha, b, static_cast<int>(ldb), a,
                      static_cast<int>(lda), &beta, c, static_cast<int>(ldc)));
  }

  void broadcast_rows(float* out, const float* row, std::int64_t rows, std::int64_t cols) override {
    activate();
    kernels::broadcast_rows(stream_, out, row, rows, cols);
    launched("broadcast_rows");
  }

  void add_column_sums(float* sums, const float* m, std::int64_t rows, std::int64_t cols) override {
    activate();
    kernels::add_column_sums(stream_, sums, m, rows, cols);
    launched("add_column_sums");
  }

  void relu(const float* in, float* out, std::uint8_t* mask, std::size_t count) override {
    activate();
    kernels::relu(stream_, in, out, mask, count);
    launched("relu");
  }

  void dropout(const float* in, float* out, std::uint8_t* keep, std::size_t count, float p,
               std::uint64_t seed, std::uint64_t call) override {
    activate();
    kernels::dropout(stream_, in, out, keep, count, p, seed, call);
    launched("dropout");
  }

  void masked_scale(const float* grad_out, const std::uint8_t* mask, float scale, float* grad_in,
                    std::size_t count) override {
    activate();
    kernels::masked_scale(stream_, grad_out, mask, scale, grad_in, count);
    launched("masked_scale");
  }

  void im2col(const float* images, std::int64_t count, std::int64_t channels, const Window& w,
              float* columns) override {
    activate();
    kernels::im2col(stream_, images, count, channels, w, columns);
    launched("im2col");
  }

  void col2im(const float* columns, std::int64_t count, std::int64_t channels, const Window& w,
              float* images) override {
    activate();
    kernels::col2im(stream_, columns, count, channels, w, images);
    launched("col2im");
  }

  void add_channel_bias(const float* products, const float* bias, std::int64_t count,
                        std::int64_t channels, std::int64_t plane, float* out) override {
    activate();
    kernels::add_channel_bias(stream_, products, bias, count, channels, plane, out);
    launched("add_channel_bias");
  }

  void gather_channels(const float* grad, std::int64_t count, std::int64_t channels,
                       std::int64_t plane, float* products, float* bias_grad) override {
    activate();
    float* sums = plane_sums_.reserve<float>(
        device_, static_cast<std::size_t>(count * channels) * sizeof(float));
    kernels::gather_channels(stream_, grad, count, channels, plane, products, bias_grad, sums);
    launched("gather_channels");
  }

  void max_pool(const float* in, std::int64_t planes, std::int64_t height, std::int64_t width,
                std::int64_t kernel, std::int64_t stride, std::int64_t out_height,
                std::int64_t out_width, float* out, std::uint32_t* argmax) override {
    activate();
    kernels::max_pool(stream_, in, planes, height, width, kernel, stride, out_height, out_width,
                      out, argmax);
    launched("max_pool");
  }

  void max_pool_backward(const float* grad_out, const std::uint32_t* argmax, std::int64_t planes,
                         std::int64_t in_plane, std::int64_t out_plane, float* grad_in) override {
    activate();
    kernels::max_pool_backward(stream_, grad_out, argmax, planes, in_plane, out_plane, grad_in);
    launched("max_pool_backward");
  }

  void softmax_cross_entropy(const float* logits, const std::vector<int>& labels,
                             std::int64_t classes, float* grad, std::vector<double>* row_loss,
                             std::vector<std::uint8_t>* row_correct) override {
    activate();
    const std::size_t rows = labels.size();
    int* device_labels = loss_labels_.reserve<int>(device_, rows * sizeof(int));
    double* loss = row_loss ? loss_rows_.reserve<double>(device_, rows * sizeof(double)) : nullptr;
    std::uint8_t* correct =
        row_correct ? loss_correct_.reserve<std::uint8_t>(device_, rows) : nullptr;
    upload(device_labels, labels.data(), rows * sizeof(int));
    kernels::softmax_cross_entropy(stream_, logits, device_labels, static_cast<std::int64_t>(rows),
                                   classes, grad, loss, correct);
    launched("softmax_cross_entropy");
    if (row_loss != nullptr) {
      row_loss->resize(rows);
      transfer(row_loss->data(), loss, rows * sizeof(double), cudaMemcpyDeviceToHost);
    }
    if (row_correct != nullptr) {
      row_correct->resize(rows);
      transfer(row_correct->data(), correct, rows, cudaMemcpyDeviceToHost);
    }
    if (row_loss != nullptr || row_correct != nullptr) synchronize();
  }

  void sgd_step(float* w, const float* g, float* velocity, std::size_t count, float lr,
                float momentum, float weight_decay) override {
    activate();
    kernels::sgd_step(stream_, w, g, velocity, count, lr, momentum, weight_decay);
    launched("sgd_step");
  }

  void adam_step(float* w, const float* g, float* m, float* v, std::size_t count, float step_size,
                 float beta1, float beta2, float eps, float weight_decay, float sqrt_c2) override {
    activate();
    kernels::adam_step(stream_, w, g, m, v, count, step_size, beta1, beta2, eps, weight_decay,
                       sqrt_c2);
    launched("adam_step");
  }

  void to_half(const float* src, float scale, std::uint16_t* half, std::size_t count) override {
    activate();
    kernels::to_half(stream_, src, scale, half, count);
    launched("to_half");
  }

  void from_half(const std::uint16_t* half, float* dst, std::size_t count) override {
    activate();
    kernels::from_half(stream_, half, dst, count);
    launched("from_half");
  }

 private:
  // Makes this device current for the calling thread: a stream or pointer of one device is
  // invalid in a call made while another is current.
  void activate() {
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess || current != device_) {
      check(device_, "cudaSetDevice", cudaSetDevice(device_));
    }
  }

  void launched(const char* kernel) { check(device_, kernel, cudaGetLastError()); }

  void transfer(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0) return;
    activate();
    check(device_, "cudaMemcpyAsync", cudaMemcpyAsync(dst, src, bytes, kind, stream_));
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  // Scratch of the loss and the convolution's bias gradient, reused across calls.
  GpuBuffer loss_labels_;
  GpuBuffer loss_rows_;
  GpuBuffer loss_correct_;
  GpuBuffer plane_sums_;
};

}  // namespace

Gpu& gpu(int device) {
  // Backends are created once and never destroyed (see CudaGpu); a device is looked up on
  // every call, so the common case takes no lock.
  static constexpr int kMaxDevices = 64;
  static std::array<std::atomic<CudaGpu*>, kMaxDevices> backends{};
  static std::mutex creating;
  if (device < 0 || device >= cuda_device_count() || device >= kMaxDevices) {
    throw unusable_device(
        device, cuda_device_count() == 0
                    ? cuda_unavailable_reason()
                    : fmt::format("this process sees {} CUDA device(s)", cuda_device_count()));
  }
  CudaGpu* backend = backends[device].load(std::memory_order_acquire);
  if (backend != nullptr) return *backend;
  std::lock_guard lock(creating);
  backend = backends[device].load(std::memory_order_relaxed);
  if (backend == nullptr) {
    backend = new CudaGpu(device);  // never deleted, see above
    backends[device].store(backend, std::memory_order_release);
  }
  return *backend;
}

}  // namespace hoop::train::detail
