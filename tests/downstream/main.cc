// The runtime's allreduce from a project that builds hoop with add_subdirectory.
#include <hoop/hoop.h>

#include <cstdio>
#include <vector>

int main() {
  hoop::init();
  std::vector<float> grad(1000, static_cast<float>(hoop::rank() + 1));
  hoop::Tensor t{grad.data(), hoop::DataType::kF32, {static_cast<std::int64_t>(grad.size())}};
  hoop::ReduceOptions sum;
  sum.op = hoop::ReduceOp::kSum;
  hoop::allreduce("grad", t, t, sum);
  const float want = static_cast<float>(hoop::size() * (hoop::size() + 1) / 2);
  for (float g : grad) {
    if (g != want) {
      std::fprintf(stderr, "rank %d: got %g, want %g\n", hoop::rank(), g, want);
      return 1;
    }
  }
  std::printf("rank %d of %d: allreduce ok (%g)\n", hoop::rank(), hoop::size(), want);
  hoop::shutdown();
  return 0;
}
