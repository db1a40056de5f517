/* Bad arguments through the C ABI: each must fail on this rank alone, with the status the C++
 * call gives and a message naming the argument, and leave the communicator usable. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"

/* What C adds to the C++ checks: null handles and out-parameters, enum values outside the
 * enums, and null counts arrays. */
static void check_c_only(hoop_comm_t* comm) {
  float x[4] = {1, 2, 3, 4};
  hoop_comm_t* none = NULL;
  EXPECT_ERROR(hoop_comm_create(NULL, NULL), HOOP_ERR_INVALID_ARGUMENT, "comm");
  hoop_comm_options_t bad_timeout = {NULL, -1, HOOP_ALGO_FROM_ENV, NULL};
  EXPECT_ERROR(hoop_comm_create(&bad_timeout, &none), HOOP_ERR_INVALID_ARGUMENT, "timeout_ms");
  CHECK(none == NULL, "a failed hoop_comm_create left a communicator");
  hoop_comm_options_t bad_algo = {NULL, 0, (hoop_algorithm_t)99, NULL};
  EXPECT_ERROR(hoop_comm_create(&bad_algo, &none), HOOP_ERR_INVALID_ARGUMENT, "algorithm");
  EXPECT_ERROR(hoop_comm_allreduce(NULL, x, x, 4, HOOP_F32, HOOP_SUM), HOOP_ERR_INVALID_ARGUMENT,
               "comm");
  EXPECT_ERROR(hoop_comm_barrier(NULL), HOOP_ERR_INVALID_ARGUMENT, "comm");
  CHECK(hoop_comm_rank(NULL) == -1 && hoop_comm_size(NULL) == -1, "rank/size of NULL not -1");
  hoop_comm_destroy(NULL);
  EXPECT_ERROR(hoop_comm_allreduce(comm, x, x, 4, (hoop_dtype_t)99, HOOP_SUM),
               HOOP_ERR_INVALID_ARGUMENT, "dtype");
  /* 256 would pass for u8 if the value were narrowed to the C++ enum's 8 bits. */
  EXPECT_ERROR(hoop_comm_allreduce(comm, x, x, 4, (hoop_dtype_t)256, HOOP_SUM),
               HOOP_ERR_INVALID_ARGUMENT, "dtype");
  EXPECT_ERROR(hoop_comm_allreduce(comm, x, x, 4, HOOP_F32, (hoop_reduce_op_t)-1),
               HOOP_ERR_INVALID_ARGUMENT, "op");
  EXPECT_ERROR(hoop_comm_allgatherv(comm, x, x, NULL, HOOP_F32), HOOP_ERR_INVALID_ARGUMENT,
               "counts");
  size_t counts[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_ERROR(hoop_comm_alltoallv(comm, x, NULL, x, counts, HOOP_F32), HOOP_ERR_INVALID_ARGUMENT,
               "send_counts");
  EXPECT_ERROR(hoop_comm_alltoallv(comm, x, counts, x, NULL, HOOP_F32), HOOP_ERR_INVALID_ARGUMENT,
               "recv_counts");
  EXPECT_ERROR(hoop_comm_gatherv(comm, x, x, NULL, HOOP_F32, 0), HOOP_ERR_INVALID_ARGUMENT,
               "counts");
  EXPECT_ERROR(hoop_comm_scatterv(comm, x, x, NULL, HOOP_F32, 0), HOOP_ERR_INVALID_ARGUMENT,
               "counts");
  CHECK(hoop_dtype_size((hoop_dtype_t)42) == 0 && hoop_dtype_size(HOOP_BF16) == 2,
        "hoop_dtype_size");
}

/* The C checks of split, dup, reduce_scatterv and the non-blocking calls; test, wait and free
 * on NULL; and a request that the C++ call's own checks fail, on this rank alone. */
static void check_requests_and_splits(hoop_comm_t* comm) {
  const int size = hoop_comm_size(comm);
  float x[4] = {1, 2, 3, 4};
  hoop_request_t* const unset = (hoop_request_t*)x; /* not NULL, to see a failure clear it */
  hoop_request_t* request = unset;
  EXPECT_ERROR(hoop_comm_iallreduce(comm, x, x, 4, HOOP_F32, HOOP_SUM, NULL),
               HOOP_ERR_INVALID_ARGUMENT, "request");
  EXPECT_ERROR(hoop_comm_iallreduce(NULL, x, x, 4, HOOP_F32, HOOP_SUM, &request),
               HOOP_ERR_INVALID_ARGUMENT, "comm");
  CHECK(request == NULL, "a failed hoop_comm_iallreduce left a request");
  request = unset;
  EXPECT_ERROR(hoop_comm_ibarrier(NULL, &request), HOOP_ERR_INVALID_ARGUMENT, "comm");
  CHECK(request == NULL, "a failed hoop_comm_ibarrier left a request");
  request = unset;
  EXPECT_ERROR(hoop_comm_ireduce_scatterv(comm, x, x, NULL, HOOP_F32, HOOP_SUM, &request),
               HOOP_ERR_INVALID_ARGUMENT, "counts");
  CHECK(request == NULL, "a failed hoop_comm_ireduce_scatterv left a request");
  EXPECT_ERROR(
      hoop_comm_isendrecv(comm, x, 4, (hoop_dtype_t)99, 0, 0, x, 4, HOOP_F32, 0, 0, &request),
      HOOP_ERR_INVALID_ARGUMENT, "dtype");
  EXPECT_ERROR(hoop_comm_reduce_scatterv(comm, x, x, NULL, HOOP_F32, HOOP_SUM),
               HOOP_ERR_INVALID_ARGUMENT, "counts");

  int done = 5;
  EXPECT_ERROR(hoop_request_test(NULL, &done), HOOP_ERR_INVALID_ARGUMENT, "request");
  CHECK(done == 0, "hoop_request_test(NULL) set done to %d", done);
  EXPECT_ERROR(hoop_request_wait(NULL), HOOP_ERR_INVALID_ARGUMENT, "request");
  hoop_request_free(NULL);

  /* Started, then failed by broadcast's own check of the root. */
  request = NULL;
  CHECK_OK(hoop_comm_ibroadcast(comm, x, 4, HOOP_F32, size, &request));
  EXPECT_ERROR(hoop_request_wait(request), HOOP_ERR_INVALID_ARGUMENT, "root");
  done = 0;
  EXPECT_ERROR(hoop_request_test(request, &done), HOOP_ERR_INVALID_ARGUMENT, "root");
  CHECK(done == 1, "a failed call tested: done %d", done);
  EXPECT_ERROR(hoop_request_test(request, NULL), HOOP_ERR_INVALID_ARGUMENT, "done");
  hoop_request_free(request);

  hoop_comm_t* out = comm; /* not NULL, to see a failure clear it */
  EXPECT_ERROR(hoop_comm_split(comm, 0, 0, NULL), HOOP_ERR_INVALID_ARGUMENT, "out");
  EXPECT_ERROR(hoop_comm_split(NULL, 0, 0, &out), HOOP_ERR_INVALID_ARGUMENT, "comm");
  CHECK(out == NULL, "a failed hoop_comm_split left a communicator");
  out = comm;
  EXPECT_ERROR(hoop_comm_split(comm, -2, 0, &out), HOOP_ERR_INVALID_ARGUMENT, "color");
  CHECK(out == NULL, "a split with color -2 left a communicator");
  EXPECT_ERROR(hoop_comm_dup(NULL, &out), HOOP_ERR_INVALID_ARGUMENT, "comm");
  EXPECT_ERROR(hoop_comm_dup(comm, NULL), HOOP_ERR_INVALID_ARGUMENT, "out");
}

/* What the C++ calls check, as a C caller sees it. */
static void check_cxx_checks(hoop_comm_t* comm) {
  const int rank = hoop_comm_rank(comm), size = hoop_comm_size(comm);
  float x[4] = {1, 2, 3, 4};
  EXPECT_ERROR(hoop_comm_allreduce(comm, x, NULL, 4, HOOP_F32, HOOP_SUM), HOOP_ERR_INVALID_ARGUMENT,
               "output");
  EXPECT_ERROR(hoop_comm_allreduce(comm, x, x, SIZE_MAX / 2, HOOP_F32, HOOP_SUM),
               HOOP_ERR_INVALID_ARGUMENT, "overflow");
  EXPECT_ERROR(hoop_comm_broadcast(comm, x, 4, HOOP_F32, size), HOOP_ERR_INVALID_ARGUMENT, "root");
  EXPECT_ERROR(hoop_comm_broadcast(comm, x, 4, HOOP_F32, -1), HOOP_ERR_INVALID_ARGUMENT, "root");
  EXPECT_ERROR(hoop_comm_reduce(comm, x, x, 4, HOOP_F32, HOOP_SUM, size), HOOP_ERR_INVALID_ARGUMENT,
               "root");
  EXPECT_ERROR(hoop_comm_reduce(comm, x, x, 4, HOOP_F32, HOOP_ADASUM, 0), HOOP_ERR_INVALID_ARGUMENT,
               "op");
  EXPECT_ERROR(hoop_comm_gather(comm, x, x, 1, HOOP_F32, -2), HOOP_ERR_INVALID_ARGUMENT, "root");
  EXPECT_ERROR(hoop_comm_scatter(comm, x, x, 1, HOOP_F32, size + 3), HOOP_ERR_INVALID_ARGUMENT,
               "root");
  EXPECT_ERROR(hoop_comm_send(comm, x, 4, HOOP_F32, rank, 0), HOOP_ERR_INVALID_ARGUMENT, "peer");
  EXPECT_ERROR(hoop_comm_send(comm, x, 4, HOOP_F32, size, 0), HOOP_ERR_INVALID_ARGUMENT, "peer");
  EXPECT_ERROR(hoop_comm_recv(comm, x, 4, HOOP_F32, -1, 0), HOOP_ERR_INVALID_ARGUMENT, "peer");
  EXPECT_ERROR(hoop_comm_recv(comm, NULL, 4, HOOP_F32, (rank + 1) % size, 0),
               HOOP_ERR_INVALID_ARGUMENT, "null");
  EXPECT_ERROR(hoop_comm_sendrecv(comm, x, 4, HOOP_F32, rank, 0, x, 4, HOOP_F32, rank, 0),
               HOOP_ERR_INVALID_ARGUMENT, "peer");
}

/* Fails a call on its own thread and copies the message that thread then sees. */
static void* fail_on_a_thread(void* message) {
  hoop_comm_barrier(NULL);
  strncpy((char*)message, hoop_last_error(), 127);
  return NULL;
}

/* hoop_last_error is per thread: another thread's failure leaves this thread's message. */
static void check_last_error_per_thread(hoop_comm_t* comm) {
  float x = 0;
  EXPECT_ERROR(hoop_comm_allreduce(comm, &x, &x, 1, (hoop_dtype_t)77, HOOP_SUM),
               HOOP_ERR_INVALID_ARGUMENT, "dtype");
  char theirs[128] = {0};
  pthread_t thread;
  CHECK(pthread_create(&thread, NULL, fail_on_a_thread, theirs) == 0, "pthread_create");
  pthread_join(thread, NULL);
  CHECK(strstr(theirs, "comm") != NULL, "the thread saw '%s'", theirs);
  CHECK(strstr(hoop_last_error(), "dtype") != NULL, "this thread now sees '%s'", hoop_last_error());
}

/* Explicit options: a second communicator beside the first (its own store keys), forced to the
 * ring with a deadline of its own, and both still usable. */
static void check_second_communicator(hoop_comm_t* comm) {
  const hoop_comm_options_t options = {getenv("HOOP_TRANSPORT"), 30000, HOOP_ALGO_RING,
                                       "c_check/second"};
  hoop_comm_t* second = NULL;
  CHECK_OK(hoop_comm_create(&options, &second));
  if (second == NULL) return;
  CHECK(hoop_comm_rank(second) == hoop_comm_rank(comm) &&
            hoop_comm_size(second) == hoop_comm_size(comm),
        "the second communicator's rank or size differs");
  int64_t x = 2;
  CHECK_OK(hoop_comm_allreduce(second, &x, &x, 1, HOOP_I64, HOOP_PROD));
  CHECK(x == (int64_t)1 << hoop_comm_size(comm), "product over the second communicator: %lld",
        (long long)x);
  CHECK_OK(hoop_comm_barrier(comm));
  hoop_comm_destroy(second);
}

int check_comm_errors(hoop_comm_t* comm) {
  const int before = g_failures;
  check_c_only(comm);
  check_cxx_checks(comm);
  check_requests_and_splits(comm);
  check_last_error_per_thread(comm);
  check_second_communicator(comm);
  /* Nothing was sent: a real collective still lines up on every rank. */
  float one = 1.0f;
  CHECK_OK(hoop_comm_allreduce(comm, NULL, &one, 1, HOOP_F32, HOOP_SUM));
  CHECK(one == (float)hoop_comm_size(comm), "allreduce after bad calls gave %g", one);
  return g_failures - before;
}
