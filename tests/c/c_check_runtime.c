/* The runtime through the C ABI: calls before hoop_init and after hoop_shutdown fail with a
 * message; in between every collective, blocking and asynchronous, matches a reference, and the
 * results the runtime sizes are read through their handles. */
#include <stdio.h>
#include <stdlib.h>

#include "c_check.h"

static hoop_tensor_t tensor(void* data, hoop_dtype_t dtype, const int64_t* shape, int ndim) {
  const hoop_tensor_t t = {data, dtype, shape, ndim, HOOP_CPU_DEVICE};
  return t;
}

/* What a runtime that is not running answers: -1 or an error, never a crash or a hang. */
static void check_not_running(const char* when) {
  float x = 1;
  const int64_t shape[1] = {1};
  const hoop_tensor_t t = tensor(&x, HOOP_F32, shape, 1);
  hoop_handle_t* h = NULL;
  CHECK(hoop_is_initialized() == 0, "%s: hoop_is_initialized is not 0", when);
  CHECK(hoop_rank() == -1 && hoop_size() == -1 && hoop_local_rank() == -1, "%s: rank not -1", when);
  EXPECT_ERROR(hoop_allreduce("x", &t, &t, NULL), HOOP_ERR_INVALID_ARGUMENT, "init");
  EXPECT_ERROR(hoop_allgather_async("x", &t, 0, &h), HOOP_ERR_INVALID_ARGUMENT, "init");
  CHECK(h == NULL, "%s: a failed call left a handle", when);
  EXPECT_ERROR(hoop_barrier(0), HOOP_ERR_INVALID_ARGUMENT, "init");
}

static void check_layout(void) {
  const int rank = hoop_rank(), size = hoop_size();
  CHECK(hoop_is_initialized() == 1, "not initialized after hoop_init");
  CHECK(size >= 1 && rank >= 0 && rank < size, "rank %d of %d", rank, size);
  /* One host: every rank is local. */
  CHECK(hoop_local_rank() == rank && hoop_local_size() == size, "local rank/size");
  CHECK(hoop_cross_rank() == 0 && hoop_cross_size() == 1, "cross rank/size");
}

/* Every dtype summed, blocking; then several asynchronous averages in flight at once. */
static void check_allreduce(int rank, int size) {
  enum { kCount = 1001, kAsync = 4 };
  const int64_t shape[2] = {7, 143};
  double want[kCount];
  hoop_reduce_options_t sum = HOOP_REDUCE_OPTIONS_INIT;
  sum.op = HOOP_SUM;
  for (size_t d = 0; d < sizeof kAllDtypes / sizeof kAllDtypes[0]; ++d) {
    const hoop_dtype_t dtype = kAllDtypes[d];
    void* buffer = xcalloc(kCount, hoop_dtype_size(dtype));
    for (size_t i = 0; i < kCount; ++i) {
      set_elem(dtype, buffer, i, small_value(rank, i));
      want[i] = 0;
      for (int r = 0; r < size; ++r) want[i] += small_value(r, i);
    }
    char name[32];
    snprintf(name, sizeof name, "sum/%d", (int)dtype);
    const hoop_tensor_t t = tensor(buffer, dtype, shape, 2);
    CHECK_OK(hoop_allreduce(name, &t, &t, &sum));
    compare(name, dtype, buffer, want, kCount, 0);
    free(buffer);
  }
  float in[kAsync][kCount], out[kAsync][kCount];
  hoop_handle_t* handles[kAsync];
  for (int k = 0; k < kAsync; ++k) {
    for (size_t i = 0; i < kCount; ++i) in[k][i] = (float)(rank * size + k);
    char name[32];
    snprintf(name, sizeof name, "avg/%d", k);
    const hoop_tensor_t ti = tensor(in[k], HOOP_F32, shape, 2);
    const hoop_tensor_t to = tensor(out[k], HOOP_F32, shape, 2);
    CHECK_OK(hoop_allreduce_async(name, &ti, &to, NULL, &handles[k]));
  }
  for (int k = 0; k < kAsync; ++k) {
    /* Poll a while as an event loop would, then block: both must end in the same outcome. */
    for (int spins = 0; spins < 1000 && hoop_poll(handles[k]) == 0; ++spins) continue;
    CHECK_OK(hoop_wait(handles[k]));
    CHECK(hoop_poll(handles[k]) == 1, "poll after wait is not 1");
    hoop_output_t none;
    EXPECT_ERROR(hoop_handle_output(handles[k], &none), HOOP_ERR_INVALID_ARGUMENT, "allreduce");
    hoop_handle_release(handles[k]);
    for (size_t i = 0; i < kCount; ++i) want[i] = (size - 1) * size / 2.0 + k;
    compare("async avg", HOOP_F32, out[k], want, kCount, 1e-6);
  }
}

/* Rank r holds r + 1 rows of 3: the result has every rank's rows in rank order. */
static void check_allgather(int rank, int size) {
  const int64_t shape[2] = {rank + 1, 3};
  float in[64 * 3];
  for (int i = 0; i < (rank + 1) * 3; ++i) in[i] = (float)pattern(rank, 30, (size_t)i);
  const hoop_tensor_t t = tensor(in, HOOP_F32, shape, 2);
  hoop_handle_t* h = NULL;
  CHECK_OK(hoop_allgather("gather", &t, 0, &h));
  hoop_output_t out;
  CHECK_OK(hoop_handle_output(h, &out));
  const int64_t rows = (int64_t)size * (size + 1) / 2;
  CHECK(out.ndim == 2 && out.shape[0] == rows && out.shape[1] == 3, "allgather shape");
  CHECK(out.dtype == HOOP_F32 && out.count == (size_t)rows * 3 && out.bytes == out.count * 4 &&
            out.device == HOOP_CPU_DEVICE,
        "allgather output description");
  double* want = xcalloc((size_t)rows * 3, sizeof(double));
  size_t at = 0;
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < (r + 1) * 3; ++i) want[at++] = pattern(r, 30, (size_t)i);
  }
  compare("allgather", HOOP_F32, out.data, want, at, 0);
  float* copy = xcalloc(out.count, sizeof(float));
  CHECK_OK(hoop_handle_copy_output(h, copy));
  compare("allgather copy", HOOP_F32, copy, want, at, 0);
  free(copy);
  free(want);
  hoop_handle_release(h);
}

/* Rank r sends j + 1 rows of 2 to rank j, so it receives rank + 1 rows from each. */
static void check_alltoall(int rank, int size) {
  int64_t splits[16];
  float in[16 * 17];
  size_t at = 0;
  for (int j = 0; j < size; ++j) {
    splits[j] = j + 1;
    for (int i = 0; i < (j + 1) * 2; ++i) in[at++] = (float)pattern(rank, j, (size_t)i);
  }
  const int64_t shape[2] = {(int64_t)at / 2, 2};
  const hoop_tensor_t t = tensor(in, HOOP_F32, shape, 2);
  hoop_handle_t* h = NULL;
  CHECK_OK(hoop_alltoall_async("alltoall", &t, splits, (size_t)size, 0, &h));
  CHECK_OK(hoop_wait(h));
  const int64_t* got = NULL;
  size_t n = 0;
  CHECK_OK(hoop_handle_received_splits(h, &got, &n));
  CHECK(n == (size_t)size, "received splits: %zu entries", n);
  for (size_t s = 0; s < n; ++s) CHECK(got[s] == rank + 1, "received split %zu", s);
  hoop_output_t out;
  CHECK_OK(hoop_handle_output(h, &out));
  double want[16 * 17];
  at = 0;
  for (int s = 0; s < size; ++s) {
    for (int i = 0; i < (rank + 1) * 2; ++i) want[at++] = pattern(s, rank, (size_t)i);
  }
  CHECK(out.count == at, "alltoall: %zu elements, want %zu", out.count, at);
  compare("alltoall", HOOP_F32, out.data, want, at, 0);
  hoop_handle_release(h);
}

/* 2 * size + 1 rows of 2 summed; the first rank takes the extra row. */
static void check_reducescatter(int rank, int size) {
  const int rows = 2 * size + 1;
  const int64_t shape[2] = {rows, 2};
  double in[64 * 2], want[64 * 2];
  for (int i = 0; i < rows * 2; ++i) in[i] = pattern(rank, 40, (size_t)i);
  const hoop_tensor_t t = tensor(in, HOOP_F64, shape, 2);
  hoop_reduce_options_t sum = HOOP_REDUCE_OPTIONS_INIT;
  sum.op = HOOP_SUM;
  hoop_handle_t* h = NULL;
  CHECK_OK(hoop_reducescatter("rs", &t, &sum, &h));
  const int first = rank * 2 + (rank > 0 ? 1 : 0), mine = rank == 0 ? 3 : 2;
  for (int i = 0; i < mine * 2; ++i) {
    want[i] = 0;
    for (int r = 0; r < size; ++r) want[i] += pattern(r, 40, (size_t)(first * 2 + i));
  }
  hoop_output_t out;
  CHECK_OK(hoop_handle_output(h, &out));
  CHECK(out.ndim == 2 && out.shape[0] == mine, "reducescatter rows");
  compare("reducescatter", HOOP_F64, out.data, want, (size_t)mine * 2, 0);
  hoop_handle_release(h);
}

static void check_broadcast_join_sets(int rank, int size) {
  int32_t data[5];
  double want[5];
  for (int i = 0; i < 5; ++i) {
    data[i] = rank == size - 1 ? 100 + i : -1;
    want[i] = 100 + i;
  }
  const int64_t shape[1] = {5};
  const hoop_tensor_t t = tensor(data, HOOP_I32, shape, 1);
  CHECK_OK(hoop_broadcast("bcast", &t, size - 1, 0));
  compare("broadcast", HOOP_I32, data, want, 5, 0);
  CHECK_OK(hoop_barrier(0));
  int last = -1;
  CHECK_OK(hoop_join(0, &last));
  CHECK(last >= 0 && last < size, "join: last rank %d", last);

  const int members[2] = {0, 1};
  int set = -1;
  CHECK_OK(hoop_add_process_set(members, 2, &set));
  size_t n = 0;
  CHECK_OK(hoop_process_set_ranks(set, NULL, 0, &n));
  int got[2] = {-1, -1};
  CHECK_OK(hoop_process_set_ranks(set, got, 2, &n));
  CHECK(n == 2 && got[0] == 0 && got[1] == 1, "process set ranks");
  int place = -2;
  CHECK_OK(hoop_process_set_rank(set, &place));
  CHECK(place == (rank < 2 ? rank : -1), "process set rank %d", place);
  if (rank < 2) {
    double x = rank + 1;
    const hoop_tensor_t tx = tensor(&x, HOOP_F64, NULL, 0);
    hoop_reduce_options_t o = HOOP_REDUCE_OPTIONS_INIT;
    o.op = HOOP_SUM;
    o.process_set = set;
    CHECK_OK(hoop_allreduce("in set", &tx, &tx, &o));
    CHECK(x == 3, "allreduce in the set gave %g", x);
  }
  CHECK_OK(hoop_remove_process_set(set));
  EXPECT_ERROR(hoop_process_set_rank(set, &place), HOOP_ERR_INVALID_ARGUMENT, "process set");
}

static void check_handle_misuse(void) {
  hoop_output_t out;
  EXPECT_ERROR(hoop_handle_output(NULL, &out), HOOP_ERR_INVALID_ARGUMENT, "handle");
  EXPECT_ERROR(hoop_wait(NULL), HOOP_ERR_INVALID_ARGUMENT, "handle");
  CHECK(hoop_poll(NULL) == -1, "poll(NULL) is not -1");
  hoop_handle_release(NULL);
  EXPECT_ERROR(hoop_allreduce(NULL, NULL, NULL, NULL), HOOP_ERR_INVALID_ARGUMENT, "name");
  EXPECT_ERROR(hoop_allgather("g", NULL, 0, NULL), HOOP_ERR_INVALID_ARGUMENT, "result");
  float x = 0;
  const hoop_tensor_t bad = tensor(&x, HOOP_F32, NULL, 2);
  hoop_handle_t* h = NULL;
  EXPECT_ERROR(hoop_allgather("g", &bad, 0, &h), HOOP_ERR_INVALID_ARGUMENT, "input.shape");
  const hoop_tensor_t ok = tensor(&x, HOOP_F32, NULL, 0);
  EXPECT_ERROR(hoop_broadcast_async("b", &ok, 0, 0, NULL), HOOP_ERR_INVALID_ARGUMENT, "handle");
}

int check_runtime(void) {
  const int before = g_failures;
  check_not_running("before hoop_init");
  CHECK_OK(hoop_init());
  CHECK_OK(hoop_init()); /* a no-op */
  check_layout();
  const int rank = hoop_rank(), size = hoop_size();
  check_allreduce(rank, size);
  check_allgather(rank, size);
  check_alltoall(rank, size);
  check_reducescatter(rank, size);
  check_broadcast_join_sets(rank, size);
  check_handle_misuse();
  CHECK_OK(hoop_shutdown());
  check_not_running("after hoop_shutdown");
  return g_failures - before;
}
