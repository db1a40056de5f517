/** @file
 * hoop's C ABI: the Communicator (communicator.h) and the runtime (hoop.h) for C and for other
 * languages' foreign-function interfaces, with no C++ type, exception or name mangling across
 * the boundary. Link with libhoop_c (build/lib/libhoop_c.so).
 *
 * Errors: every function that can fail returns hoop_status_t (HOOP_OK is 0); on failure the
 * calling thread's hoop_last_error() says why, naming the argument, rank or tensor. A success
 * leaves it as it was (as errno). Functions that return a number (ranks, sizes) return -1 on
 * failure, with the message set the same way.
 *
 * Ownership: the caller owns every buffer it passes and must keep it valid until the call
 * returns, or for an asynchronous call until its handle has finished (hoop_poll() true or
 * hoop_wait() returned), or for a non-blocking communicator call until its request has
 * completed. Results whose size the runtime decides (allgather, alltoall,
 * reducescatter) are owned by their handle and freed by hoop_handle_release(). Strings
 * returned by hoop are owned by hoop.
 *
 * Threads: the runtime functions may be called from any thread; one communicator must not run
 * two calls at once. Every rank calls the collectives in the same order, as in C++. */
#ifndef HOOP_C_H_
#define HOOP_C_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define HOOP_C_API __attribute__((visibility("default")))
#else
#define HOOP_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** The outcome of a call; the values are hoop::StatusCode's, so they may be logged as such. */
typedef enum hoop_status {
  HOOP_OK = 0,                   /**< success */
  HOOP_ERR_INVALID_ARGUMENT = 1, /**< the caller passed something unusable */
  HOOP_ERR_TIMEOUT = 2,          /**< a deadline passed */
  HOOP_ERR_PEER_LOST = 3,        /**< a peer disconnected or died */
  HOOP_ERR_AUTH_FAILED = 4,      /**< wrong job secret, job id or protocol version */
  HOOP_ERR_PROTOCOL = 5,         /**< malformed or unexpected bytes on a connection */
  HOOP_ERR_NOT_FOUND = 6,        /**< a key or file does not exist */
  HOOP_ERR_MISMATCH = 7,         /**< ranks disagree on a collective's parameters */
  HOOP_ERR_IO = 8,               /**< a system call failed */
  HOOP_ERR_ABORTED = 9,          /**< cancelled because the job is ending */
  HOOP_ERR_INTERNAL = 10         /**< a bug in hoop, or memory exhausted */
} hoop_status_t;

/** Element types; the values are hoop::DataType's. */
typedef enum hoop_dtype {
  HOOP_U8 = 0,
  HOOP_I8 = 1,
  HOOP_I32 = 2,
  HOOP_I64 = 3,
  HOOP_F16 = 4, /**< IEEE binary16 bit patterns */
  HOOP_BF16 = 5,
  HOOP_F32 = 6,
  HOOP_F64 = 7,
  HOOP_I16 = 8
} hoop_dtype_t;

/** Reduction operators; the values are hoop::ReduceOp's. HOOP_AVG divides the sum by the number
 * of contributors (truncating for integers); HOOP_ADASUM is for float allreduce only. */
typedef enum hoop_reduce_op {
  HOOP_SUM = 0,
  HOOP_AVG = 1,
  HOOP_MIN = 2,
  HOOP_MAX = 3,
  HOOP_PROD = 4,
  HOOP_ADASUM = 5
} hoop_reduce_op_t;

/** Allreduce algorithms. HOOP_ALGO_FROM_ENV is 0 so that zeroed options follow HOOP_ALGO, as the
 * C++ API's unset optional does; HOOP_ALGO_AUTO forces the cost model's choice. */
typedef enum hoop_algorithm {
  HOOP_ALGO_FROM_ENV = 0,
  HOOP_ALGO_AUTO = 1,
  HOOP_ALGO_RING = 2,
  HOOP_ALGO_RECURSIVE_DOUBLING = 3,
  HOOP_ALGO_TREE = 4,
  HOOP_ALGO_RABENSEIFNER = 5,
  HOOP_ALGO_HIERARCHICAL = 6
} hoop_algorithm_t;

/** The device value of a tensor in host memory. */
#define HOOP_CPU_DEVICE (-1)

/** hoop's version ("0.1.0"), to check at run time which library was loaded. */
HOOP_C_API const char* hoop_version(void);
/** Why the calling thread's last failed call failed; "" when none has. Valid until this thread's
 * next failing call. */
HOOP_C_API const char* hoop_last_error(void);
/** A status's name ("ok", "invalid argument", "peer lost", ...), for messages. */
HOOP_C_API const char* hoop_status_name(hoop_status_t status);
/** Bytes in one element, or 0 for a value outside hoop_dtype_t (so a binding can size buffers
 * without its own table). */
HOOP_C_API size_t hoop_dtype_size(hoop_dtype_t dtype);

/* ---- Communicator: collectives the caller orders itself (NCCL/Gloo-style) ---- */

/** A communicator: a group of ranks that run collectives together (hoop::Communicator). */
typedef struct hoop_comm hoop_comm_t;

/** How a communicator is built. Zeroed fields come from the environment, so
 * `hoop_comm_options_t o = {0};` (or passing NULL) means "as the launcher said". */
typedef struct hoop_comm_options {
  const char* transport;      /**< "auto", "tcp", "shm"; NULL or "": HOOP_TRANSPORT */
  int64_t timeout_ms;         /**< deadline of each collective; 0: HOOP_TIMEOUT_SECONDS */
  hoop_algorithm_t algorithm; /**< forced allreduce algorithm; FROM_ENV: HOOP_ALGO */
  /** Names the communicator's keys in the rendezvous store, so that several communicators of one
   * job can exist at once (each with its own name); NULL or "": the default. */
  const char* key_prefix;
} hoop_comm_options_t;

/** Joins the job the environment describes (hooprun, mpirun, Slurm) and connects the ranks;
 * collective: every rank calls it. *comm is NULL on failure. */
HOOP_C_API hoop_status_t hoop_comm_create(const hoop_comm_options_t* options, hoop_comm_t** comm);
/** Waits for the non-blocking calls in flight on its connections, then closes them once no
 * communicator split from them is left; NULL is a no-op. Peers still using the connections see
 * this rank as lost. */
HOOP_C_API void hoop_comm_destroy(hoop_comm_t* comm);
/** This rank; -1 when comm is NULL. */
HOOP_C_API int hoop_comm_rank(const hoop_comm_t* comm);
/** The number of ranks; -1 when comm is NULL. */
HOOP_C_API int hoop_comm_size(const hoop_comm_t* comm);

/** Passed as hoop_comm_split's color by a rank that joins none of the new communicators. */
#define HOOP_NO_COLOR (-1)

/** A new communicator over the ranks of comm that pass the same color (>= 0), ranked by key, ties
 * by their rank in comm (MPI_Comm_split, ncclCommSplit); collective over comm. A rank passing
 * HOOP_NO_COLOR gets HOOP_OK and *out = NULL; *out is NULL on failure too. The new communicator
 * reuses comm's connections, so both keep one rule: their calls are made in the same order on
 * every rank they have in common, and a failure in either fails both. It takes comm's settings
 * (algorithm, deadline), may outlive comm, and is destroyed with hoop_comm_destroy; the
 * hierarchical allreduce needs a communicator from hoop_comm_create. */
HOOP_C_API hoop_status_t hoop_comm_split(hoop_comm_t* comm, int color, int key, hoop_comm_t** out);
/** A communicator over the same ranks in the same order (MPI_Comm_dup): a split with one color,
 * keyed by rank. */
HOOP_C_API hoop_status_t hoop_comm_dup(hoop_comm_t* comm, hoop_comm_t** out);

/* The collectives of communicator.h with its semantics: a call is in place when input equals
 * output (input may then be NULL); counts are element counts; the `counts` arrays hold one entry
 * per rank. Buffers that only the root reads or writes may be NULL on other ranks. */

/** output[i] = op over ranks of input[i]. */
HOOP_C_API hoop_status_t hoop_comm_allreduce(hoop_comm_t* comm, const void* input, void* output,
                                             size_t count, hoop_dtype_t dtype, hoop_reduce_op_t op);
/** The root's `count` elements into `buffer` on every rank. */
HOOP_C_API hoop_status_t hoop_comm_broadcast(hoop_comm_t* comm, void* buffer, size_t count,
                                             hoop_dtype_t dtype, int root);
/** output (size * count) = every rank's `count` elements in rank order. */
HOOP_C_API hoop_status_t hoop_comm_allgather(hoop_comm_t* comm, const void* input, void* output,
                                             size_t count, hoop_dtype_t dtype);
/** Rank r contributes counts[r] elements; output holds their sum. */
HOOP_C_API hoop_status_t hoop_comm_allgatherv(hoop_comm_t* comm, const void* input, void* output,
                                              const size_t* counts, hoop_dtype_t dtype);
/** Reduces size * count elements and leaves block `rank` (count elements) in output. */
HOOP_C_API hoop_status_t hoop_comm_reduce_scatter(hoop_comm_t* comm, const void* input,
                                                  void* output, size_t count, hoop_dtype_t dtype,
                                                  hoop_reduce_op_t op);
/** Reduce-scatter with counts[r] elements for rank r (MPI_Reduce_scatter): input holds
 * sum(counts) elements on every rank, and rank r's output gets the reduction of the counts[r]
 * elements at the sum of counts[0..r). In place when input is NULL or equals output: output then
 * holds all sum(counts) inputs and this rank's block lands at its start. */
HOOP_C_API hoop_status_t hoop_comm_reduce_scatterv(hoop_comm_t* comm, const void* input,
                                                   void* output, const size_t* counts,
                                                   hoop_dtype_t dtype, hoop_reduce_op_t op);
/** Block j of rank i's input becomes block i of rank j's output (count elements a block). */
HOOP_C_API hoop_status_t hoop_comm_alltoall(hoop_comm_t* comm, const void* input, void* output,
                                            size_t count, hoop_dtype_t dtype);
/** send_counts[j] elements to rank j, recv_counts[j] from it, packed in rank order. */
HOOP_C_API hoop_status_t hoop_comm_alltoallv(hoop_comm_t* comm, const void* input,
                                             const size_t* send_counts, void* output,
                                             const size_t* recv_counts, hoop_dtype_t dtype);
/** Returns once every rank has entered it. */
HOOP_C_API hoop_status_t hoop_comm_barrier(hoop_comm_t* comm);
/** Every rank's input reduced into the root's output (element-wise ops only). */
HOOP_C_API hoop_status_t hoop_comm_reduce(hoop_comm_t* comm, const void* input, void* output,
                                          size_t count, hoop_dtype_t dtype, hoop_reduce_op_t op,
                                          int root);
/** The root's output (size * count) = every rank's input in rank order. */
HOOP_C_API hoop_status_t hoop_comm_gather(hoop_comm_t* comm, const void* input, void* output,
                                          size_t count, hoop_dtype_t dtype, int root);
/** Gather with counts[r] elements from rank r. */
HOOP_C_API hoop_status_t hoop_comm_gatherv(hoop_comm_t* comm, const void* input, void* output,
                                           const size_t* counts, hoop_dtype_t dtype, int root);
/** Block r of the root's input (count elements a block) becomes rank r's output. */
HOOP_C_API hoop_status_t hoop_comm_scatter(hoop_comm_t* comm, const void* input, void* output,
                                           size_t count, hoop_dtype_t dtype, int root);
/** Scatter with counts[r] elements to rank r. */
HOOP_C_API hoop_status_t hoop_comm_scatterv(hoop_comm_t* comm, const void* input, void* output,
                                            const size_t* counts, hoop_dtype_t dtype, int root);

/* Point-to-point: between two ranks messages arrive in send order; the tag, dtype and count are
 * checked against the matching send, not used to pick it. Two ranks that send to each other
 * first use hoop_comm_sendrecv, since a large send may wait for the peer's receive. */

/** `count` elements of `data` to rank `peer` (not this rank). */
HOOP_C_API hoop_status_t hoop_comm_send(hoop_comm_t* comm, const void* data, size_t count,
                                        hoop_dtype_t dtype, int peer, int32_t tag);
/** `count` elements from rank `peer` into `data`. */
HOOP_C_API hoop_status_t hoop_comm_recv(hoop_comm_t* comm, void* data, size_t count,
                                        hoop_dtype_t dtype, int peer, int32_t tag);
/** A send and a receive in flight at once (MPI_Sendrecv), to the same or different peers. */
HOOP_C_API hoop_status_t hoop_comm_sendrecv(hoop_comm_t* comm, const void* send_data,
                                            size_t send_count, hoop_dtype_t send_dtype,
                                            int send_peer, int32_t send_tag, void* recv_data,
                                            size_t recv_count, hoop_dtype_t recv_dtype,
                                            int recv_peer, int32_t recv_tag);

/* ---- Non-blocking communicator calls (MPI_Iallreduce and friends) ---- */

/** A non-blocking call in flight. */
typedef struct hoop_request hoop_request_t;

/* hoop_comm_i<name> takes hoop_comm_<name>'s arguments and a last one, `request`: it starts the
 * call, stores a new request in *request and returns at once. A thread of the communicator runs
 * the calls one at a time in the order they were started, so they overlap with the caller's
 * own work and complete in that order, while their requests may be waited for in any order.
 *
 * Ordering across ranks: every rank starts the non-blocking calls of a communicator, and makes
 * its blocking ones, in the same order, as for blocking calls alone. A blocking call on a
 * communicator (or on one split from the same connections) with calls in flight first waits for
 * them. A call that fails aborts the communicator, so the calls started after it fail with the
 * same cause. There is no isend/irecv: on the one thread, a send started before a receive would
 * wait for its peer to take it first; hoop_comm_isendrecv moves both at once.
 *
 * Buffers: the buffers, and the counts arrays a v-form points to, stay valid and untouched until
 * the request has completed (hoop_request_test set *done, or hoop_request_wait returned), even
 * when the request is freed before that.
 *
 * Errors: what C checks itself (a NULL comm or request, an enum value outside its enum, a NULL
 * counts array) fails the function, with *request NULL and nothing started; the checks of the
 * C++ call (buffers, counts, roots, peers) and the call's own failures fail the request. */

/** Whether the call has finished, without blocking. The answers:
 *   running:   HOOP_OK, *done = 0;
 *   succeeded: HOOP_OK, *done = 1;
 *   failed:    the call's status, *done = 1 (hoop_last_error() says why).
 * The same answer again once finished. A NULL request (or done) gives HOOP_ERR_INVALID_ARGUMENT
 * with *done = 0 where done is not NULL, which tells it from a failed call. */
HOOP_C_API hoop_status_t hoop_request_test(hoop_request_t* request, int* done);
/** Blocks until the call has finished and returns its status (again on a later wait);
 * HOOP_ERR_INVALID_ARGUMENT for a NULL request. */
HOOP_C_API hoop_status_t hoop_request_wait(hoop_request_t* request);
/** Frees the request; NULL is a no-op. This does not cancel the call: it still runs in its place
 * in the order, its buffers must outlive it, and hoop_comm_destroy waits for it. */
HOOP_C_API void hoop_request_free(hoop_request_t* request);

/** hoop_comm_allreduce, started. */
HOOP_C_API hoop_status_t hoop_comm_iallreduce(hoop_comm_t* comm, const void* input, void* output,
                                              size_t count, hoop_dtype_t dtype, hoop_reduce_op_t op,
                                              hoop_request_t** request);
/** hoop_comm_broadcast, started. */
HOOP_C_API hoop_status_t hoop_comm_ibroadcast(hoop_comm_t* comm, void* buffer, size_t count,
                                              hoop_dtype_t dtype, int root,
                                              hoop_request_t** request);
/** hoop_comm_allgather, started. */
HOOP_C_API hoop_status_t hoop_comm_iallgather(hoop_comm_t* comm, const void* input, void* output,
                                              size_t count, hoop_dtype_t dtype,
                                              hoop_request_t** request);
/** hoop_comm_allgatherv, started. */
HOOP_C_API hoop_status_t hoop_comm_iallgatherv(hoop_comm_t* comm, const void* input, void* output,
                                               const size_t* counts, hoop_dtype_t dtype,
                                               hoop_request_t** request);
/** hoop_comm_reduce_scatter, started. */
HOOP_C_API hoop_status_t hoop_comm_ireduce_scatter(hoop_comm_t* comm, const void* input,
                                                   void* output, size_t count, hoop_dtype_t dtype,
                                                   hoop_reduce_op_t op, hoop_request_t** request);
/** hoop_comm_reduce_scatterv, started. */
HOOP_C_API hoop_status_t hoop_comm_ireduce_scatterv(hoop_comm_t* comm, const void* input,
                                                    void* output, const size_t* counts,
                                                    hoop_dtype_t dtype, hoop_reduce_op_t op,
                                                    hoop_request_t** request);
/** hoop_comm_alltoall, started. */
HOOP_C_API hoop_status_t hoop_comm_ialltoall(hoop_comm_t* comm, const void* input, void* output,
                                             size_t count, hoop_dtype_t dtype,
                                             hoop_request_t** request);
/** hoop_comm_alltoallv, started. */
HOOP_C_API hoop_status_t hoop_comm_ialltoallv(hoop_comm_t* comm, const void* input,
                                              const size_t* send_counts, void* output,
                                              const size_t* recv_counts, hoop_dtype_t dtype,
                                              hoop_request_t** request);
/** hoop_comm_barrier, started. */
HOOP_C_API hoop_status_t hoop_comm_ibarrier(hoop_comm_t* comm, hoop_request_t** request);
/** hoop_comm_reduce, started. */
HOOP_C_API hoop_status_t hoop_comm_ireduce(hoop_comm_t* comm, const void* input, void* output,
                                           size_t count, hoop_dtype_t dtype, hoop_reduce_op_t op,
                                           int root, hoop_request_t** request);
/** hoop_comm_gather, started. */
HOOP_C_API hoop_status_t hoop_comm_igather(hoop_comm_t* comm, const void* input, void* output,
                                           size_t count, hoop_dtype_t dtype, int root,
                                           hoop_request_t** request);
/** hoop_comm_gatherv, started. */
HOOP_C_API hoop_status_t hoop_comm_igatherv(hoop_comm_t* comm, const void* input, void* output,
                                            const size_t* counts, hoop_dtype_t dtype, int root,
                                            hoop_request_t** request);
/** hoop_comm_scatter, started. */
HOOP_C_API hoop_status_t hoop_comm_iscatter(hoop_comm_t* comm, const void* input, void* output,
                                            size_t count, hoop_dtype_t dtype, int root,
                                            hoop_request_t** request);
/** hoop_comm_scatterv, started. */
HOOP_C_API hoop_status_t hoop_comm_iscatterv(hoop_comm_t* comm, const void* input, void* output,
                                             const size_t* counts, hoop_dtype_t dtype, int root,
                                             hoop_request_t** request);
/** hoop_comm_sendrecv, started. */
HOOP_C_API hoop_status_t hoop_comm_isendrecv(hoop_comm_t* comm, const void* send_data,
                                             size_t send_count, hoop_dtype_t send_dtype,
                                             int send_peer, int32_t send_tag, void* recv_data,
                                             size_t recv_count, hoop_dtype_t recv_dtype,
                                             int recv_peer, int32_t recv_tag,
                                             hoop_request_t** request);

/* ---- Runtime: named tensors, negotiated and fused in the background (Horovod-style) ---- */

/** A caller's dense row-major tensor. `shape` (ndim entries; ndim 0 is a scalar) is read during
 * the call only; `data` must stay valid until the operation has finished. */
typedef struct hoop_tensor {
  void* data;           /**< the first element */
  hoop_dtype_t dtype;   /**< the element type */
  const int64_t* shape; /**< ndim dimensions, outermost first */
  int ndim;             /**< the number of dimensions; 0: a scalar */
  int device; /**< HOOP_CPU_DEVICE for host memory, else a CUDA device ordinal (so a zeroed
               * tensor means CUDA device 0: set it) */
} hoop_tensor_t;

/** Settings of a reduction; NULL means HOOP_REDUCE_OPTIONS_INIT (a zeroed struct would scale by
 * 0, hence the initializer). */
typedef struct hoop_reduce_options {
  hoop_reduce_op_t op; /**< the reduction */
  double prescale;     /**< multiplies each input first (float types only when != 1) */
  double postscale;    /**< multiplies the result */
  int process_set;     /**< 0: every rank */
} hoop_reduce_options_t;
/** The defaults of hoop_reduce_options_t: HOOP_AVG over every rank, unscaled. */
#define HOOP_REDUCE_OPTIONS_INIT \
  { HOOP_AVG, 1.0, 1.0, 0 }

/** An asynchronous operation. Owns the result of allgather, alltoall and reducescatter. */
typedef struct hoop_handle hoop_handle_t;

/** Joins the job and starts the background thread; a second call is a no-op, a call after
 * hoop_shutdown starts afresh. */
HOOP_C_API hoop_status_t hoop_init(void);
/** Finishes the work in flight on every rank and stops the runtime; every rank calls it. */
HOOP_C_API hoop_status_t hoop_shutdown(void);
/** 1 between a successful hoop_init and hoop_shutdown, else 0. */
HOOP_C_API int hoop_is_initialized(void);
/* This rank's place in the job, on its host and among the hosts; -1 before hoop_init. */

/** This rank; -1 before hoop_init. */
HOOP_C_API int hoop_rank(void);
/** The number of ranks; -1 before hoop_init. */
HOOP_C_API int hoop_size(void);
/** This rank among the ranks of its host; -1 before hoop_init. */
HOOP_C_API int hoop_local_rank(void);
/** The number of ranks on this rank's host; -1 before hoop_init. */
HOOP_C_API int hoop_local_size(void);
/** The index of this rank's host among the hosts; -1 before hoop_init. */
HOOP_C_API int hoop_cross_rank(void);
/** The number of hosts; -1 before hoop_init. */
HOOP_C_API int hoop_cross_size(void);

/* The asynchronous calls store a new handle in *handle (NULL on failure); release it with
 * hoop_handle_release whatever its outcome. `name` identifies the tensor across ranks. */

/** Reduces input over the set into output (same dtype and shape; may be the same memory). */
HOOP_C_API hoop_status_t hoop_allreduce_async(const char* name, const hoop_tensor_t* input,
                                              const hoop_tensor_t* output,
                                              const hoop_reduce_options_t* options,
                                              hoop_handle_t** handle);
/** Concatenates every rank's input along the first dimension (which may differ by rank). */
HOOP_C_API hoop_status_t hoop_allgather_async(const char* name, const hoop_tensor_t* input,
                                              int process_set, hoop_handle_t** handle);
/** The root's tensor (root numbered within the set) into `tensor` on every rank. */
HOOP_C_API hoop_status_t hoop_broadcast_async(const char* name, const hoop_tensor_t* tensor,
                                              int root, int process_set, hoop_handle_t** handle);
/** splits[j] first-dimension rows to rank j of the set; num_splits 0: an even split. */
HOOP_C_API hoop_status_t hoop_alltoall_async(const char* name, const hoop_tensor_t* input,
                                             const int64_t* splits, size_t num_splits,
                                             int process_set, hoop_handle_t** handle);
/** Reduces input over the set; this rank keeps its share of the first dimension. */
HOOP_C_API hoop_status_t hoop_reducescatter_async(const char* name, const hoop_tensor_t* input,
                                                  const hoop_reduce_options_t* options,
                                                  hoop_handle_t** handle);
/** This rank has no more tensors this step (allreduces of others get zeros from it). */
HOOP_C_API hoop_status_t hoop_join_async(int process_set, hoop_handle_t** handle);

/* Blocking forms. Those with a result store a finished handle holding it in *result (NULL on
 * failure), so that its shape can be read before copying; release it as any handle. */

/** hoop_allreduce_async waited for. */
HOOP_C_API hoop_status_t hoop_allreduce(const char* name, const hoop_tensor_t* input,
                                        const hoop_tensor_t* output,
                                        const hoop_reduce_options_t* options);
/** hoop_allgather_async waited for; *result holds the output. */
HOOP_C_API hoop_status_t hoop_allgather(const char* name, const hoop_tensor_t* input,
                                        int process_set, hoop_handle_t** result);
/** hoop_broadcast_async waited for. */
HOOP_C_API hoop_status_t hoop_broadcast(const char* name, const hoop_tensor_t* tensor, int root,
                                        int process_set);
/** hoop_alltoall_async waited for; *result holds the output and the received splits. */
HOOP_C_API hoop_status_t hoop_alltoall(const char* name, const hoop_tensor_t* input,
                                       const int64_t* splits, size_t num_splits, int process_set,
                                       hoop_handle_t** result);
/** hoop_reducescatter_async waited for; *result holds this rank's share. */
HOOP_C_API hoop_status_t hoop_reducescatter(const char* name, const hoop_tensor_t* input,
                                            const hoop_reduce_options_t* options,
                                            hoop_handle_t** result);
/** Returns once every rank of the set has reached it. */
HOOP_C_API hoop_status_t hoop_barrier(int process_set);
/** hoop_join_async waited for; *last_rank (may be NULL) gets the rank that joined last. */
HOOP_C_API hoop_status_t hoop_join(int process_set, int* last_rank);

/** 1 once the operation has finished (successfully or not), 0 before, -1 for a NULL handle;
 * never blocks, so an event loop can drive it. */
HOOP_C_API int hoop_poll(const hoop_handle_t* handle);
/** Blocks until the operation finishes and returns its outcome (Horovod's synchronize). */
HOOP_C_API hoop_status_t hoop_wait(const hoop_handle_t* handle);

/** A finished handle's result, borrowed: valid until hoop_handle_release. */
typedef struct hoop_output {
  const void* data;     /**< host memory, or device memory when device >= 0 */
  hoop_dtype_t dtype;   /**< the element type */
  const int64_t* shape; /**< ndim dimensions, outermost first */
  int ndim;             /**< the number of dimensions */
  size_t count;         /**< elements */
  size_t bytes;         /**< count times the element's size */
  int device;           /**< HOOP_CPU_DEVICE, or the CUDA device holding data */
} hoop_output_t;

/** The result of a finished allgather, alltoall or reducescatter. */
HOOP_C_API hoop_status_t hoop_handle_output(const hoop_handle_t* handle, hoop_output_t* output);
/** Copies that result to dst (output.bytes bytes; host, or the result's device). */
HOOP_C_API hoop_status_t hoop_handle_copy_output(const hoop_handle_t* handle, void* dst);
/** Alltoall: the rows received from each rank of the set; borrowed like the output. */
HOOP_C_API hoop_status_t hoop_handle_received_splits(const hoop_handle_t* handle,
                                                     const int64_t** splits, size_t* count);
/** Join: the rank (in the set) that joined last. */
HOOP_C_API hoop_status_t hoop_handle_last_joined_rank(const hoop_handle_t* handle, int* rank);
/** Frees the handle and its result; NULL is a no-op. The operation itself is not cancelled:
 * the caller's buffers must outlive it even when its handle is released early. */
HOOP_C_API void hoop_handle_release(hoop_handle_t* handle);

/* Process sets: subsets of the job's ranks with their own coordination. Creating and removing
 * one is collective over the whole job, in the same order on every rank. */

/** Creates a process set of the `count` global ranks at `ranks` (sorted, distinct) and stores
 * its number in *process_set. */
HOOP_C_API hoop_status_t hoop_add_process_set(const int* ranks, size_t count, int* process_set);
/** Removes a process set; its pending work fails. */
HOOP_C_API hoop_status_t hoop_remove_process_set(int process_set);
/** The set's global ranks: *count gets their number and at most `capacity` go to ranks (NULL
 * with capacity 0 asks for the number only). */
HOOP_C_API hoop_status_t hoop_process_set_ranks(int process_set, int* ranks, size_t capacity,
                                                size_t* count);
/** Stores in *rank this rank's place in the set, -1 when it is not a member. */
HOOP_C_API hoop_status_t hoop_process_set_rank(int process_set, int* rank);

#ifdef __cplusplus
}
#endif

#endif /* HOOP_C_H_ */
