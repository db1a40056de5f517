// The matrix products' thread count. OpenBLAS starts one thread per core in every process;
// ranks sharing a host would then run cores x ranks threads on cores.
#include <cblas.h>
#include <fmt/format.h>

#include "hoop/train.h"

namespace hoop::train {

void set_compute_threads(int threads) {
  if (threads < 1)
    throw Error(invalid_argument(fmt::format("compute threads must be >= 1, not {}", threads)));
  openblas_set_num_threads(threads);
}

int compute_threads() { return openblas_get_num_threads(); }

}  // namespace hoop::train
