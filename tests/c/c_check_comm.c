/* Every communicator collective through the C ABI against references computed here: allreduce
 * for every dtype and op, the others on two dtypes (4 and 1 bytes), each on every count of
 * kCounts and, where rooted, with the root moving from call to call. */
#include <stdio.h>
#include <stdlib.h>

#include "c_check.h"

static const hoop_reduce_op_t kOps[5] = {HOOP_SUM, HOOP_AVG, HOOP_MIN, HOOP_MAX, HOOP_PROD};
static const hoop_dtype_t kMoveDtypes[2] = {HOOP_F32, HOOP_U8};

/* The reference of `op` over every rank's small_value at index i. */
static double reduce_ref(hoop_reduce_op_t op, hoop_dtype_t dtype, int size, size_t i) {
  double acc = small_value(0, i);
  for (int r = 1; r < size; ++r) {
    const double v = small_value(r, i);
    switch (op) {
      case HOOP_SUM:
      case HOOP_AVG:
        acc += v;
        break;
      case HOOP_MIN:
        acc = v < acc ? v : acc;
        break;
      case HOOP_MAX:
        acc = v > acc ? v : acc;
        break;
      case HOOP_PROD:
        acc *= v;
        break;
      case HOOP_ADASUM:
        break;
    }
  }
  if (op != HOOP_AVG) return acc;
  const int is_float =
      dtype == HOOP_F16 || dtype == HOOP_BF16 || dtype == HOOP_F32 || dtype == HOOP_F64;
  return is_float ? acc / size : (double)((long long)acc / size);
}

/* Averages of floats round; every other result is exact. */
static double tolerance(hoop_reduce_op_t op, hoop_dtype_t dtype) {
  if (op != HOOP_AVG) return 0;
  if (dtype == HOOP_F16 || dtype == HOOP_BF16) return 1e-2;
  return dtype == HOOP_F32 ? 1e-6 : 1e-12;
}

static void check_allreduce(hoop_comm_t* comm, hoop_dtype_t dtype, hoop_reduce_op_t op,
                            size_t count) {
  const int rank = hoop_comm_rank(comm), size = hoop_comm_size(comm);
  const size_t esize = hoop_dtype_size(dtype);
  void* in = xcalloc(count, esize);
  void* out = xcalloc(count, esize);
  double* want = xcalloc(count, sizeof(double));
  for (size_t i = 0; i < count; ++i) {
    set_elem(dtype, in, i, small_value(rank, i));
    want[i] = reduce_ref(op, dtype, size, i);
  }
  CHECK_OK(hoop_comm_allreduce(comm, in, out, count, dtype, op));
  compare("allreduce", dtype, out, want, count, tolerance(op, dtype));
  /* In place on the same data. */
  CHECK_OK(hoop_comm_allreduce(comm, in, in, count, dtype, op));
  compare("allreduce in place", dtype, in, want, count, tolerance(op, dtype));
  free(in);
  free(out);
  free(want);
}

/* Fills `buffer` with pattern(a, b, i) and `want` (may be NULL) alike. */
static void fill(hoop_dtype_t dtype, void* buffer, double* want, size_t count, int a, int b) {
  for (size_t i = 0; i < count; ++i) {
    if (buffer != NULL) set_elem(dtype, buffer, i, pattern(a, b, i));
    if (want != NULL) want[i] = pattern(a, b, i);
  }
}

/* One case's buffers, sized for the largest v-variant (count + size elements from each rank). */
struct case_buffers {
  char* in;
  char* out;
  double* want;
  size_t* counts;
  size_t* recv_counts;
};

static struct case_buffers case_buffers_new(hoop_dtype_t dtype, size_t count, int size) {
  const size_t total = (count + (size_t)size) * (size_t)size;
  struct case_buffers b;
  b.in = xcalloc(total, hoop_dtype_size(dtype));
  b.out = xcalloc(total, hoop_dtype_size(dtype));
  b.want = xcalloc(total, sizeof(double));
  b.counts = xcalloc((size_t)size, sizeof(size_t));
  b.recv_counts = xcalloc((size_t)size, sizeof(size_t));
  return b;
}

static void case_buffers_free(struct case_buffers* b) {
  free(b->in);
  free(b->out);
  free(b->want);
  free(b->counts);
  free(b->recv_counts);
}

static double quarter(int rank, size_t i) { return (double)((int)pattern(rank, 3, i) / 4); }

/* broadcast, allgather(v), reduce_scatter, alltoall(v) on one dtype and count. */
static void check_unrooted(hoop_comm_t* comm, hoop_dtype_t dtype, size_t count) {
  const int rank = hoop_comm_rank(comm), size = hoop_comm_size(comm);
  const size_t esize = hoop_dtype_size(dtype);
  struct case_buffers b = case_buffers_new(dtype, count, size);
  char *in = b.in, *out = b.out;
  double* want = b.want;
  size_t *counts = b.counts, *recv_counts = b.recv_counts;

  const int root = (int)(count % (size_t)size);
  fill(dtype, out, want, count, root, 0);
  if (rank != root) fill(dtype, out, NULL, count, 9, 9);
  CHECK_OK(hoop_comm_broadcast(comm, out, count, dtype, root));
  compare("broadcast", dtype, out, want, count, 0);

  fill(dtype, in, NULL, count, rank, 1);
  for (int r = 0; r < size; ++r) fill(dtype, NULL, want + (size_t)r * count, count, r, 1);
  CHECK_OK(hoop_comm_allgather(comm, in, out, count, dtype));
  compare("allgather", dtype, out, want, count * (size_t)size, 0);

  /* Rank r contributes count + r elements. */
  size_t offset = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = count + (size_t)r;
    fill(dtype, NULL, want + offset, counts[r], r, 2);
    offset += counts[r];
  }
  fill(dtype, in, NULL, counts[rank], rank, 2);
  CHECK_OK(hoop_comm_allgatherv(comm, in, out, counts, dtype));
  compare("allgatherv", dtype, out, want, offset, 0);

  /* Quarters of the pattern (below 63), so that a sum over 3 ranks fits in u8. */
  for (size_t i = 0; i < count * (size_t)size; ++i) set_elem(dtype, in, i, quarter(rank, i));
  for (size_t i = 0; i < count; ++i) {
    want[i] = 0;
    for (int r = 0; r < size; ++r) want[i] += quarter(r, (size_t)rank * count + i);
  }
  CHECK_OK(hoop_comm_reduce_scatter(comm, in, out, count, dtype, HOOP_SUM));
  compare("reduce_scatter", dtype, out, want, count, 0);

  /* Block j of rank r's input is pattern(r, j, i). */
  for (int j = 0; j < size; ++j) {
    fill(dtype, in + (size_t)j * count * esize, NULL, count, rank, j);
    fill(dtype, NULL, want + (size_t)j * count, count, j, rank);
  }
  CHECK_OK(hoop_comm_alltoall(comm, in, out, count, dtype));
  compare("alltoall", dtype, out, want, count * (size_t)size, 0);

  /* Rank r sends count + j elements to rank j, so rank j gets count + j from each. */
  size_t sent = 0, received = 0;
  for (int j = 0; j < size; ++j) {
    counts[j] = count + (size_t)j;
    recv_counts[j] = count + (size_t)rank;
    fill(dtype, in + sent * esize, NULL, counts[j], rank, j + 10);
    fill(dtype, NULL, want + received, recv_counts[j], j, rank + 10);
    sent += counts[j];
    received += recv_counts[j];
  }
  CHECK_OK(hoop_comm_alltoallv(comm, in, counts, out, recv_counts, dtype));
  compare("alltoallv", dtype, out, want, received, 0);

  case_buffers_free(&b);
}

/* reduce, gather(v), scatter(v) with root `root`; non-roots pass NULL for the root's buffers. */
static void check_rooted(hoop_comm_t* comm, hoop_dtype_t dtype, size_t count, int root) {
  const int rank = hoop_comm_rank(comm), size = hoop_comm_size(comm);
  const int is_root = rank == root;
  const size_t esize = hoop_dtype_size(dtype);
  struct case_buffers b = case_buffers_new(dtype, count, size);
  char *in = b.in, *out = b.out;
  double* want = b.want;
  size_t* counts = b.counts;

  for (size_t i = 0; i < count; ++i) {
    set_elem(dtype, in, i, small_value(rank, i));
    want[i] = reduce_ref(HOOP_MAX, dtype, size, i);
  }
  CHECK_OK(hoop_comm_reduce(comm, in, is_root ? out : NULL, count, dtype, HOOP_MAX, root));
  if (is_root) compare("reduce", dtype, out, want, count, 0);

  fill(dtype, in, NULL, count, rank, 4);
  for (int r = 0; r < size; ++r) fill(dtype, NULL, want + (size_t)r * count, count, r, 4);
  CHECK_OK(hoop_comm_gather(comm, in, is_root ? out : NULL, count, dtype, root));
  if (is_root) compare("gather", dtype, out, want, count * (size_t)size, 0);

  size_t offset = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = count + (size_t)(size - 1 - r);
    fill(dtype, NULL, want + offset, counts[r], r, 5);
    offset += counts[r];
  }
  fill(dtype, in, NULL, counts[rank], rank, 5);
  CHECK_OK(hoop_comm_gatherv(comm, in, is_root ? out : NULL, counts, dtype, root));
  if (is_root) compare("gatherv", dtype, out, want, offset, 0);

  /* The root's block r is pattern(r, 6, i). */
  if (is_root) {
    for (int r = 0; r < size; ++r) fill(dtype, in + (size_t)r * count * esize, NULL, count, r, 6);
  }
  fill(dtype, NULL, want, count, rank, 6);
  CHECK_OK(hoop_comm_scatter(comm, is_root ? in : NULL, out, count, dtype, root));
  compare("scatter", dtype, out, want, count, 0);

  offset = 0;
  for (int r = 0; r < size; ++r) {
    if (is_root) fill(dtype, in + offset * esize, NULL, counts[r], r, 7);
    offset += counts[r];
  }
  fill(dtype, NULL, want, counts[rank], rank, 7);
  CHECK_OK(hoop_comm_scatterv(comm, is_root ? in : NULL, out, counts, dtype, root));
  compare("scatterv", dtype, out, want, counts[rank], 0);

  case_buffers_free(&b);
}

int check_comm_collectives(hoop_comm_t* comm) {
  const int before = g_failures;
  for (size_t d = 0; d < sizeof kAllDtypes / sizeof kAllDtypes[0]; ++d) {
    for (size_t c = 0; c < sizeof kCounts / sizeof kCounts[0]; ++c) {
      /* Every op on the small counts and the prime, the sum on the large one. */
      const size_t ops = c + 1 < sizeof kCounts / sizeof kCounts[0] ? 5 : 1;
      for (size_t o = 0; o < ops; ++o) check_allreduce(comm, kAllDtypes[d], kOps[o], kCounts[c]);
    }
  }
  const int size = hoop_comm_size(comm);
  for (size_t d = 0; d < sizeof kMoveDtypes / sizeof kMoveDtypes[0]; ++d) {
    for (size_t c = 0; c < sizeof kCounts / sizeof kCounts[0]; ++c) {
      check_unrooted(comm, kMoveDtypes[d], kCounts[c]);
      check_rooted(comm, kMoveDtypes[d], kCounts[c], (int)((c + d) % (size_t)size));
    }
  }
  CHECK_OK(hoop_comm_barrier(comm));
  return g_failures - before;
}

/* A ring of sendrecv, then a send from rank 0 to rank 1 and one back, on every count. */
int check_comm_p2p(hoop_comm_t* comm) {
  const int before = g_failures;
  const int rank = hoop_comm_rank(comm), size = hoop_comm_size(comm);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  for (size_t c = 0; c < sizeof kCounts / sizeof kCounts[0]; ++c) {
    const size_t count = kCounts[c];
    float* out = xcalloc(count, sizeof(float));
    float* in = xcalloc(count, sizeof(float));
    double* want = xcalloc(count, sizeof(double));
    fill(HOOP_F32, out, NULL, count, rank, 20);
    fill(HOOP_F32, NULL, want, count, prev, 20);
    CHECK_OK(hoop_comm_sendrecv(comm, out, count, HOOP_F32, next, 7, in, count, HOOP_F32, prev, 7));
    compare("sendrecv", HOOP_F32, in, want, count, 0);
    if (rank <= 1) {
      const int peer = 1 - rank;
      if (rank == 0) {
        CHECK_OK(hoop_comm_send(comm, out, count, HOOP_F32, peer, 3));
        CHECK_OK(hoop_comm_recv(comm, in, count, HOOP_F32, peer, 4));
      } else {
        CHECK_OK(hoop_comm_recv(comm, in, count, HOOP_F32, peer, 3));
        CHECK_OK(hoop_comm_send(comm, out, count, HOOP_F32, peer, 4));
      }
      fill(HOOP_F32, NULL, want, count, peer, 20);
      compare("send/recv", HOOP_F32, in, want, count, 0);
    }
    free(out);
    free(in);
    free(want);
  }
  CHECK_OK(hoop_comm_barrier(comm));
  return g_failures - before;
}
