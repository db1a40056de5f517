/* allreduce_c: hoop from plain C. Each rank contributes (rank + 1) * [1, 2, 3, 4] and prints
 * the sum, once through a communicator and once through the runtime's named tensors.
 *
 *   build/bin/hooprun -np 2 build/bin/allreduce_c */
#include <hoop/c.h>
#include <stdio.h>
#include <string.h>

/* Prints why a call failed and gives the exit code. */
static int failed(const char* what, hoop_status_t status) {
  fprintf(stderr, "%s failed (%s): %s\n", what, hoop_status_name(status), hoop_last_error());
  return 1;
}

static int with_communicator(void) {
  hoop_comm_t* comm = NULL;
  hoop_status_t s = hoop_comm_create(NULL, &comm);
  if (s != HOOP_OK) return failed("hoop_comm_create", s);
  const int rank = hoop_comm_rank(comm);
  float data[4];
  for (int i = 0; i < 4; ++i) data[i] = (float)((rank + 1) * (i + 1));
  /* In place: the same buffer as input and output. */
  s = hoop_comm_allreduce(comm, data, data, 4, HOOP_F32, HOOP_SUM);
  if (s == HOOP_OK) {
    printf("rank %d of %d: communicator sum = [%g, %g, %g, %g]\n", rank, hoop_comm_size(comm),
           data[0], data[1], data[2], data[3]);
  }
  hoop_comm_destroy(comm);
  return s == HOOP_OK ? 0 : failed("hoop_comm_allreduce", s);
}

static int with_runtime(void) {
  hoop_status_t s = hoop_init();
  if (s != HOOP_OK) return failed("hoop_init", s);
  double data[4];
  for (int i = 0; i < 4; ++i) data[i] = (hoop_rank() + 1) * (i + 1);
  const int64_t shape[1] = {4};
  const hoop_tensor_t tensor = {data, HOOP_F64, shape, 1, HOOP_CPU_DEVICE};
  hoop_reduce_options_t sum = HOOP_REDUCE_OPTIONS_INIT;
  sum.op = HOOP_SUM;
  s = hoop_allreduce("example/data", &tensor, &tensor, &sum);
  if (s == HOOP_OK) {
    printf("rank %d of %d: runtime sum = [%g, %g, %g, %g]\n", hoop_rank(), hoop_size(), data[0],
           data[1], data[2], data[3]);
  }
  const hoop_status_t down = hoop_shutdown();
  if (s != HOOP_OK) return failed("hoop_allreduce", s);
  return down == HOOP_OK ? 0 : failed("hoop_shutdown", down);
}

static const char kUsage[] =
    "Usage: allreduce_c [--help] [--version]\n"
    "hoop from plain C: each rank contributes (rank + 1) * [1, 2, 3, 4] and prints the sum,\n"
    "through a communicator and through the runtime. Launch with hooprun -np N.\n"
    "Options:\n"
    "  -h, --help     Print this help and exit\n"
    "  --version      Print the version and exit\n";

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    printf("allreduce_c (hoop) %s\n", hoop_version());
    return 0;
  }
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    fputs(kUsage, stdout);
    return 0;
  }
  if (argc > 1) {  /* a usage error, exit 2 as every hoop program */
    fprintf(stderr, "allreduce_c: unknown argument '%s'\n%s", argv[1], kUsage);
    return 2;
  }
  printf("hoop %s\n", hoop_version());
  if (with_communicator() != 0) return 1;
  return with_runtime();
}
