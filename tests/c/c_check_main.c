/* c_check: the rank that hooprun launches for the C ABI's tests (c_abi_test.cc), compiled as
 * C11 so that include/hoop/c.h is proven to be plain C. Modes:
 *   comm:       every communicator collective and point-to-point call against a reference
 *   errors:     bad arguments, each naming the argument, with the communicator usable after
 *   groups:     reduce_scatterv, and communicators split and duplicated from the first
 *   async:      non-blocking calls in flight at once, waited for and polled
 *   runtime:    the runtime's calls, before init, between init and shutdown, and after
 *   mismatch:   rank 1 passes a different count; every rank prints its error
 *   early_exit: the last rank exits after joining; every other rank prints its error
 * A mode that passes prints "rank R: MODE ok (N checks)". */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"

/* Prints a fault mode's outcome on this rank. */
static int report_fault(const char* mode, int rank, hoop_status_t status) {
  printf("rank %d: %s result: %s: %s\n", rank, mode, hoop_status_name(status),
         status == HOOP_OK ? "" : hoop_last_error());
  fflush(stdout);
  return status == HOOP_OK ? 0 : 2;
}

static int run_mismatch(hoop_comm_t* comm) {
  const int rank = hoop_comm_rank(comm);
  const size_t count = rank == 1 ? 1001 : 1000;
  float* data = xcalloc(count, sizeof(float));
  hoop_status_t s = hoop_comm_allreduce(comm, data, data, count, HOOP_F32, HOOP_SUM);
  if (s == HOOP_OK) s = hoop_comm_barrier(comm);
  free(data);
  return report_fault("mismatch", rank, s);
}

static int run_early_exit(hoop_comm_t* comm) {
  const int rank = hoop_comm_rank(comm), size = hoop_comm_size(comm);
  /* The barrier holds the last rank until every rank is past hoop_comm_create, whose own
   * exchanges would otherwise be what fails; the others may still be inside it when it leaves. */
  hoop_status_t s = hoop_comm_barrier(comm);
  if (rank == size - 1) {
    printf("rank %d: exiting early\n", rank);
    fflush(stdout);
    _Exit(0); /* no goodbye: the peers learn of it from the closed connections */
  }
  enum { kCount = 1 << 18 };
  float* data = xcalloc(kCount, sizeof(float));
  for (int i = 0; i < 1000 && s == HOOP_OK; ++i) {
    s = hoop_comm_allreduce(comm, data, data, kCount, HOOP_F32, HOOP_SUM);
  }
  free(data);
  return report_fault("early exit", rank, s);
}

typedef int (*check_fn)(hoop_comm_t* comm);

static int check_comm(hoop_comm_t* comm) {
  return check_comm_collectives(comm) + check_comm_p2p(comm);
}

/* The check a communicator mode runs, or NULL for the other modes. */
static check_fn check_of(const char* mode) {
  if (strcmp(mode, "comm") == 0) return check_comm;
  if (strcmp(mode, "errors") == 0) return check_comm_errors;
  if (strcmp(mode, "groups") == 0) return check_comm_groups;
  if (strcmp(mode, "async") == 0) return check_comm_async;
  return NULL;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "comm";
  if (strcmp(mode, "runtime") == 0) {
    const int failures = check_runtime();
    /* The rank comes from the launcher's environment: the runtime has shut down by now. */
    const char* rank = getenv("HOOP_RANK");
    if (failures == 0) printf("rank %s: runtime ok (%d checks)\n", rank ? rank : "?", g_checks);
    return failures == 0 ? 0 : 1;
  }
  /* The fault modes ignore hooprun's SIGTERM (sent once a rank fails) from the start, so that
   * every rank lives to print its own outcome; the test's deadline bounds them. A rank still
   * finishing hoop_comm_create when another fails may fail there: that outcome counts too. */
  const char* fault = strcmp(mode, "mismatch") == 0     ? "mismatch"
                      : strcmp(mode, "early_exit") == 0 ? "early exit"
                                                        : NULL;
  if (fault != NULL) signal(SIGTERM, SIG_IGN);
  hoop_comm_t* comm = NULL;
  const hoop_status_t created = hoop_comm_create(NULL, &comm);
  if (created != HOOP_OK && fault != NULL) {
    const char* rank = getenv("HOOP_RANK");
    return report_fault(fault, rank ? atoi(rank) : -1, created);
  }
  if (created != HOOP_OK) {
    printf("FAIL hoop_comm_create: %s: %s\n", hoop_status_name(created), hoop_last_error());
    return 1;
  }
  int rc = 0;
  const check_fn check = check_of(mode);
  if (check != NULL) {
    const int failures = check(comm);
    if (failures == 0) printf("rank %d: %s ok (%d checks)\n", hoop_comm_rank(comm), mode, g_checks);
    rc = failures == 0 ? 0 : 1;
  } else if (strcmp(mode, "mismatch") == 0) {
    rc = run_mismatch(comm);
  } else if (strcmp(mode, "early_exit") == 0) {
    rc = run_early_exit(comm);
  } else {
    printf("usage: c_check comm|errors|groups|async|runtime|mismatch|early_exit\n");
    rc = 64;
  }
  hoop_comm_destroy(comm);
  return rc;
}
