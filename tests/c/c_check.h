/* The C ABI's check program (c_check), compiled as C: what its parts share. Each part counts
 * its failures in g_failures and prints one "FAIL" line per failure, naming the call. */
#ifndef HOOP_TESTS_C_CHECK_H_
#define HOOP_TESTS_C_CHECK_H_

#include <hoop/c.h>
#include <stddef.h>

extern int g_failures;
extern int g_checks;

/* Records a failure at file:line with a printf-style message. */
void fail_at(const char* file, int line, const char* format, ...);

#define CHECK(cond, ...)                                   \
  do {                                                     \
    ++g_checks;                                            \
    if (!(cond)) fail_at(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

/* A call that must succeed; on failure names it with hoop's status and message. */
#define CHECK_OK(call)                                                                          \
  do {                                                                                          \
    const hoop_status_t check_ok_status_ = (call);                                              \
    CHECK(check_ok_status_ == HOOP_OK, "%s: %s: %s", #call, hoop_status_name(check_ok_status_), \
          hoop_last_error());                                                                   \
  } while (0)

/* A call that must fail with `code` and a message that contains `word` (the argument). */
void expect_error(const char* file, int line, const char* what, hoop_status_t got,
                  hoop_status_t code, const char* word);
#define EXPECT_ERROR(call, code, word) expect_error(__FILE__, __LINE__, #call, (call), code, word)

/* Element i of a buffer of `dtype`, as a double, and the reverse (f16 and bf16: exactly for
 * integers up to 256, all the checks store). */
double get_elem(hoop_dtype_t dtype, const void* buffer, size_t i);
void set_elem(hoop_dtype_t dtype, void* buffer, size_t i, double value);

/* calloc that ends the program when memory is exhausted (a check cannot go on without it). */
void* xcalloc(size_t count, size_t size);

/* Compares `count` elements of `got` with `want` (relative tolerance `tol`; 0: exact), naming
 * `what` and the first differing index. */
void compare(const char* what, hoop_dtype_t dtype, const void* got, const double* want,
             size_t count, double tol);

/* A small value for (rank, index): 1..5, so that a product over 3 ranks fits in i8. */
double small_value(int rank, size_t i);
/* A value for (a, b, index) below 251, exact in every dtype: what collectives move. */
double pattern(int a, int b, size_t i);

extern const hoop_dtype_t kAllDtypes[9];
/* Counts every communicator collective runs: empty, one, a prime and a large one. */
extern const size_t kCounts[4];

/* counts[r] for rank r: base + r, except 0 where (r + shift) % 3 == 0, so that each shift puts
 * the empty blocks on other ranks. Returns their sum. */
size_t counts_with_zeros(size_t* counts, int size, size_t base, int shift);
/* want[i] = the sum over `size` ranks of small_value(r, first + i), for `count` elements. */
void sum_of_small_values(double* want, int size, size_t first, size_t count);

/* The parts, each returning the number of failures. */
int check_comm_collectives(hoop_comm_t* comm);
int check_comm_p2p(hoop_comm_t* comm);
int check_comm_errors(hoop_comm_t* comm);
int check_comm_groups(hoop_comm_t* comm);
int check_comm_async(hoop_comm_t* comm);
int check_runtime(void);

#endif /* HOOP_TESTS_C_CHECK_H_ */
