/* The non-blocking communicator calls through the C ABI: several in flight at once, waited for
 * in reverse order and checked against references; a request polled until it is done; and a
 * blocking call, which first waits for the calls started before it. */
#define _POSIX_C_SOURCE 200809L /* nanosleep, under -std=c11 */

#include <stdlib.h>
#include <time.h>

#include "c_check.h"

enum { kAllreduces = 3, kBlock = 1000, kRingCount = 4099 };
static const size_t kAllreduceCounts[kAllreduces] = {1, 10007, 262147};

/* Every buffer of the calls in flight: they must outlive the calls. */
struct in_flight {
  float* sums[kAllreduces];
  float* gather_in;
  float* gathered;
  float* scatter_in;
  float* scattered;
  size_t* counts; /* reduce_scatterv's, read by the call until it completes */
  float* rsv_in;
  float* rsv_out;
  float* ring_out;
  float* ring_in;
};

static void in_flight_free(struct in_flight* f) {
  for (int a = 0; a < kAllreduces; ++a) free(f->sums[a]);
  free(f->gather_in);
  free(f->gathered);
  free(f->scatter_in);
  free(f->scattered);
  free(f->counts);
  free(f->rsv_in);
  free(f->rsv_out);
  free(f->ring_out);
  free(f->ring_in);
}

/* Fills `count` floats with pattern(a, b, i). */
static float* patterned(size_t count, int a, int b) {
  float* p = xcalloc(count, sizeof(float));
  for (size_t i = 0; i < count; ++i) p[i] = (float)pattern(a, b, i);
  return p;
}

/* Compares `count` floats with pattern(a, b, i). */
static void compare_pattern(const char* what, const float* got, size_t count, int a, int b) {
  double* want = xcalloc(count, sizeof(double));
  for (size_t i = 0; i < count; ++i) want[i] = pattern(a, b, i);
  compare(what, HOOP_F32, got, want, count, 0);
  free(want);
}

/* Compares `count` floats with the sum over ranks of small_value(r, first + i). */
static void compare_sums(const char* what, const float* got, int size, size_t first, size_t count) {
  double* want = xcalloc(count, sizeof(double));
  sum_of_small_values(want, size, first, count);
  compare(what, HOOP_F32, got, want, count, 0);
  free(want);
}

/* The buffers' results, once every call has completed. */
static void check_results(const struct in_flight* f, int rank, int size, int gather_root) {
  for (int a = 0; a < kAllreduces; ++a)
    compare_sums("iallreduce", f->sums[a], size, 0, kAllreduceCounts[a]);
  if (rank == gather_root) {
    for (int r = 0; r < size; ++r)
      compare_pattern("igather", f->gathered + (size_t)r * kBlock, kBlock, r, 30);
  }
  compare_pattern("iscatter", f->scattered, kBlock, rank, 31);
  size_t first = 0;
  for (int r = 0; r < rank; ++r) first += f->counts[r];
  compare_sums("ireduce_scatterv", f->rsv_out, size, first, f->counts[rank]);
  compare_pattern("isendrecv", f->ring_in, kRingCount, (rank + size - 1) % size, 32);
}

/* Every kind of call started before any is waited for, then waited for last to first. */
static void check_many_in_flight(hoop_comm_t* comm) {
  const int rank = hoop_comm_rank(comm), size = hoop_comm_size(comm);
  const int gather_root = size - 1, scatter_root = 0;
  struct in_flight f = {0};
  hoop_request_t* requests[kAllreduces + 5] = {0};
  int started = 0;

  for (int a = 0; a < kAllreduces; ++a) {
    const size_t count = kAllreduceCounts[a];
    f.sums[a] = xcalloc(count, sizeof(float));
    for (size_t i = 0; i < count; ++i) f.sums[a][i] = (float)small_value(rank, i);
    CHECK_OK(hoop_comm_iallreduce(comm, f.sums[a], f.sums[a], count, HOOP_F32, HOOP_SUM,
                                  &requests[started++]));
  }
  f.gather_in = patterned(kBlock, rank, 30);
  f.gathered = xcalloc((size_t)size * kBlock, sizeof(float));
  CHECK_OK(hoop_comm_igather(comm, f.gather_in, rank == gather_root ? f.gathered : NULL, kBlock,
                             HOOP_F32, gather_root, &requests[started++]));
  f.scatter_in = xcalloc((size_t)size * kBlock, sizeof(float));
  for (int r = 0; r < size; ++r) {
    for (size_t i = 0; i < kBlock; ++i)
      f.scatter_in[(size_t)r * kBlock + i] = (float)pattern(r, 31, i);
  }
  f.scattered = xcalloc(kBlock, sizeof(float));
  CHECK_OK(hoop_comm_iscatter(comm, rank == scatter_root ? f.scatter_in : NULL, f.scattered, kBlock,
                              HOOP_F32, scatter_root, &requests[started++]));
  f.counts = xcalloc((size_t)size, sizeof(size_t));
  const size_t total = counts_with_zeros(f.counts, size, 5003, 1);
  f.rsv_in = xcalloc(total, sizeof(float));
  for (size_t i = 0; i < total; ++i) f.rsv_in[i] = (float)small_value(rank, i);
  f.rsv_out = xcalloc(f.counts[rank], sizeof(float));
  CHECK_OK(hoop_comm_ireduce_scatterv(comm, f.rsv_in, f.rsv_out, f.counts, HOOP_F32, HOOP_SUM,
                                      &requests[started++]));
  f.ring_out = patterned(kRingCount, rank, 32);
  f.ring_in = xcalloc(kRingCount, sizeof(float));
  CHECK_OK(hoop_comm_isendrecv(comm, f.ring_out, kRingCount, HOOP_F32, (rank + 1) % size, 9,
                               f.ring_in, kRingCount, HOOP_F32, (rank + size - 1) % size, 9,
                               &requests[started++]));
  CHECK_OK(hoop_comm_ibarrier(comm, &requests[started++]));

  for (int k = started - 1; k >= 0; --k) {
    CHECK(requests[k] != NULL, "call %d started without a request", k);
    CHECK_OK(hoop_request_wait(requests[k]));
  }
  check_results(&f, rank, size, gather_root);
  /* Waiting again gives the same outcome. */
  CHECK_OK(hoop_request_wait(requests[0]));
  for (int k = 0; k < started; ++k) hoop_request_free(requests[k]);
  in_flight_free(&f);
}

/* hoop_request_test polled until the call is done, then asked again. */
static void check_polled(hoop_comm_t* comm) {
  const int rank = hoop_comm_rank(comm), size = hoop_comm_size(comm);
  const size_t count = kAllreduceCounts[kAllreduces - 1];
  float* data = xcalloc(count, sizeof(float));
  for (size_t i = 0; i < count; ++i) data[i] = (float)small_value(rank, i);
  hoop_request_t* request = NULL;
  CHECK_OK(hoop_comm_iallreduce(comm, data, data, count, HOOP_F32, HOOP_SUM, &request));
  int done = 0;
  hoop_status_t s = HOOP_OK;
  const struct timespec pause = {0, 100000};
  while ((s = hoop_request_test(request, &done)) == HOOP_OK && !done) nanosleep(&pause, NULL);
  CHECK(s == HOOP_OK && done == 1, "hoop_request_test: %s, done %d: %s", hoop_status_name(s), done,
        hoop_last_error());
  compare_sums("iallreduce polled", data, size, 0, count);
  done = 0;
  CHECK_OK(hoop_request_test(request, &done));
  CHECK(done == 1, "a finished request tested again: done %d", done);
  hoop_request_free(request);
  free(data);
}

/* A blocking call returns only once the calls started before it have completed. */
static void check_blocking_after_started(hoop_comm_t* comm) {
  const int size = hoop_comm_size(comm);
  int64_t x = 1, y = 10;
  hoop_request_t* first = NULL;
  hoop_request_t* second = NULL;
  CHECK_OK(hoop_comm_ibarrier(comm, &first));
  CHECK_OK(hoop_comm_iallreduce(comm, &x, &x, 1, HOOP_I64, HOOP_SUM, &second));
  CHECK_OK(hoop_comm_allreduce(comm, &y, &y, 1, HOOP_I64, HOOP_SUM));
  int done_first = 0, done_second = 0;
  CHECK_OK(hoop_request_test(first, &done_first));
  CHECK_OK(hoop_request_test(second, &done_second));
  CHECK(done_first == 1 && done_second == 1,
        "a blocking call returned before the calls started earlier: done %d and %d", done_first,
        done_second);
  CHECK(x == size && y == 10 * size, "allreduces: %lld and %lld", (long long)x, (long long)y);
  hoop_request_free(first);
  hoop_request_free(second);
}

int check_comm_async(hoop_comm_t* comm) {
  const int before = g_failures;
  check_many_in_flight(comm);
  check_polled(comm);
  check_blocking_after_started(comm);
  CHECK_OK(hoop_comm_barrier(comm));
  return g_failures - before;
}
