/* reduce_scatterv and the communicators made from another (split, dup) through the C ABI:
 * results against references computed here, and each new communicator's rank, size and order
 * proven by collectives over it. */
#include <stdint.h>
#include <stdlib.h>

#include "c_check.h"

/* At 2 ranks the shifts put the empty block on the first rank, on none, or on the last. */
size_t counts_with_zeros(size_t* counts, int size, size_t base, int shift) {
  size_t total = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = (r + shift) % 3 == 0 ? 0 : base + (size_t)r;
    total += counts[r];
  }
  return total;
}

void sum_of_small_values(double* want, int size, size_t first, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    want[i] = 0;
    for (int r = 0; r < size; ++r) want[i] += small_value(r, first + i);
  }
}

/* One reduce_scatterv of sums, out of place, then in place with NULL input and with input ==
 * output (the block lands at the output's start). */
static void check_reduce_scatterv(hoop_comm_t* comm, hoop_dtype_t dtype, size_t base, int shift) {
  const int rank = hoop_comm_rank(comm), size = hoop_comm_size(comm);
  const size_t esize = hoop_dtype_size(dtype);
  size_t* counts = xcalloc((size_t)size, sizeof(size_t));
  const size_t total = counts_with_zeros(counts, size, base, shift);
  size_t first = 0;
  for (int r = 0; r < rank; ++r) first += counts[r];
  const size_t mine = counts[rank];
  void* in = xcalloc(total, esize);
  void* out = xcalloc(total, esize);
  double* want = xcalloc(mine, sizeof(double));
  sum_of_small_values(want, size, first, mine);

  for (size_t i = 0; i < total; ++i) set_elem(dtype, in, i, small_value(rank, i));
  CHECK_OK(hoop_comm_reduce_scatterv(comm, in, out, counts, dtype, HOOP_SUM));
  compare("reduce_scatterv", dtype, out, want, mine, 0);

  for (int same = 0; same < 2; ++same) {
    for (size_t i = 0; i < total; ++i) set_elem(dtype, out, i, small_value(rank, i));
    CHECK_OK(hoop_comm_reduce_scatterv(comm, same ? out : NULL, out, counts, dtype, HOOP_SUM));
    compare(same ? "reduce_scatterv in place (input == output)" : "reduce_scatterv in place (NULL)",
            dtype, out, want, mine, 0);
  }
  free(counts);
  free(in);
  free(out);
  free(want);
}

/* An allgather of every member's global rank: the members in the new communicator's order. */
static void check_members(hoop_comm_t* group, int global_rank, const int* want_members,
                          const char* what) {
  const int size = hoop_comm_size(group);
  int64_t mine = global_rank;
  int64_t* got = xcalloc((size_t)size, sizeof(int64_t));
  double* want = xcalloc((size_t)size, sizeof(double));
  for (int j = 0; j < size; ++j) want[j] = want_members[j];
  CHECK_OK(hoop_comm_allgather(group, &mine, got, 1, HOOP_I64));
  compare(what, HOOP_I64, got, want, (size_t)size, 0);
  free(got);
  free(want);
}

/* Ranks of one parity together, keyed in reverse: the highest rank of a parity comes first. */
static void check_split_by_parity(hoop_comm_t* comm) {
  const int rank = hoop_comm_rank(comm), size = hoop_comm_size(comm);
  hoop_comm_t* half = NULL;
  CHECK_OK(hoop_comm_split(comm, rank % 2, size - rank, &half));
  if (half == NULL) return;
  int* members = xcalloc((size_t)size, sizeof(int));
  int n = 0;
  int64_t sum = 0;
  for (int r = size - 1; r >= 0; --r) {
    if (r % 2 != rank % 2) continue;
    members[n++] = r;
    sum += r + 1;
  }
  CHECK(hoop_comm_size(half) == n, "parity split: size %d, want %d", hoop_comm_size(half), n);
  CHECK(hoop_comm_rank(half) == (size - 1 - rank) / 2, "parity split: rank %d, want %d",
        hoop_comm_rank(half), (size - 1 - rank) / 2);
  check_members(half, rank, members, "parity split's members");
  int64_t x = rank + 1;
  CHECK_OK(hoop_comm_allreduce(half, &x, &x, 1, HOOP_I64, HOOP_SUM));
  CHECK(x == sum, "allreduce over the parity group: %lld, want %lld", (long long)x, (long long)sum);
  free(members);
  hoop_comm_destroy(half);
}

/* Rank 0 joins no group; the others form one, ranked as before less one. */
static void check_no_color(hoop_comm_t* comm) {
  const int rank = hoop_comm_rank(comm), size = hoop_comm_size(comm);
  hoop_comm_t* rest = comm; /* not NULL, to see the split set it */
  CHECK_OK(hoop_comm_split(comm, rank == 0 ? HOOP_NO_COLOR : 7, rank, &rest));
  if (rank == 0) {
    CHECK(rest == NULL, "HOOP_NO_COLOR gave a communicator");
    return;
  }
  if (rest == NULL) return;
  CHECK(hoop_comm_size(rest) == size - 1 && hoop_comm_rank(rest) == rank - 1,
        "without rank 0: rank %d of %d", hoop_comm_rank(rest), hoop_comm_size(rest));
  int64_t x = 1;
  CHECK_OK(hoop_comm_allreduce(rest, &x, &x, 1, HOOP_I64, HOOP_SUM));
  CHECK(x == size - 1, "allreduce without rank 0: %lld", (long long)x);
  hoop_comm_destroy(rest);
}

/* A dup has the parent's ranks in the parent's order; calls on the two interleave. */
static void check_dup(hoop_comm_t* comm) {
  const int rank = hoop_comm_rank(comm), size = hoop_comm_size(comm);
  hoop_comm_t* copy = NULL;
  CHECK_OK(hoop_comm_dup(comm, &copy));
  if (copy == NULL) return;
  CHECK(hoop_comm_rank(copy) == rank && hoop_comm_size(copy) == size, "dup: rank %d of %d",
        hoop_comm_rank(copy), hoop_comm_size(copy));
  int* members = xcalloc((size_t)size, sizeof(int));
  for (int r = 0; r < size; ++r) members[r] = r;
  check_members(copy, rank, members, "dup's members");
  free(members);
  int64_t x = 2, y = 3;
  CHECK_OK(hoop_comm_allreduce(copy, &x, &x, 1, HOOP_I64, HOOP_SUM));
  CHECK_OK(hoop_comm_allreduce(comm, &y, &y, 1, HOOP_I64, HOOP_SUM));
  CHECK(x == 2 * size && y == 3 * size, "allreduce over dup and parent: %lld and %lld",
        (long long)x, (long long)y);
  hoop_comm_destroy(copy);
}

/* A split of a split outlives its parent, destroyed first. */
static void check_nested_split(hoop_comm_t* comm) {
  const int rank = hoop_comm_rank(comm), size = hoop_comm_size(comm);
  hoop_comm_t* parent = NULL;
  CHECK_OK(hoop_comm_split(comm, 0, rank, &parent));
  if (parent == NULL) return;
  /* Rank 0 alone, the others together. */
  hoop_comm_t* child = NULL;
  CHECK_OK(hoop_comm_split(parent, rank == 0 ? 0 : 1, rank, &child));
  hoop_comm_destroy(parent);
  if (child == NULL) return;
  const int want_size = rank == 0 ? 1 : size - 1;
  CHECK(hoop_comm_size(child) == want_size, "nested split: size %d, want %d", hoop_comm_size(child),
        want_size);
  int64_t x = rank;
  CHECK_OK(hoop_comm_allreduce(child, &x, &x, 1, HOOP_I64, HOOP_SUM));
  const int64_t want = rank == 0 ? 0 : (int64_t)size * (size - 1) / 2;
  CHECK(x == want, "allreduce over a split outliving its parent: %lld, want %lld", (long long)x,
        (long long)want);
  hoop_comm_destroy(child);
}

int check_comm_groups(hoop_comm_t* comm) {
  const int before = g_failures;
  static const hoop_dtype_t kDtypes[2] = {HOOP_F32, HOOP_U8};
  static const size_t kBases[3] = {1, 10007, 262147};
  for (int d = 0; d < 2; ++d) {
    for (int b = 0; b < 3; ++b) {
      for (int shift = 0; shift < 3; ++shift)
        check_reduce_scatterv(comm, kDtypes[d], kBases[b], shift);
    }
  }
  check_split_by_parity(comm);
  check_no_color(comm);
  check_dup(comm);
  check_nested_split(comm);
  CHECK_OK(hoop_comm_barrier(comm));
  return g_failures - before;
}
