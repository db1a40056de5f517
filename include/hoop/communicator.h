/// @file
/// hoop::Communicator: the low-level collective API, usable on its own NCCL/Gloo-style by
/// programs that order their collectives themselves. Every rank must call the same collectives
/// in the same order with matching arguments.
///
/// Buffers: a collective is in-place when its input and output pointers are equal (the input
/// pointer may then also be null). Counts are element counts. Nothing is written outside the
/// output buffer the caller passed. Every call returns within the communicator's timeout, with
/// an error naming the cause (a lost rank, a timeout, a bad argument) rather than hanging.
///
/// Device buffers: in a build with CUDA, every collective also takes CUDA device pointers, all of
/// one call's buffers on one device, the same device for every call of one communicator. The
/// call runs on hoop's own stream and returns when the result is in place, so the caller
/// synchronizes the stream that produced the inputs first. HOOP_GPU_BACKEND picks NCCL, hoop's
/// algorithms over CUDA IPC (one host), or staging through host memory; the first device call
/// sets that up and is collective like every call.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "hoop/core.h"
#include "hoop/rendezvous.h"
#include "hoop/transport.h"

namespace hoop {

/// The collectives of this header, for messages, tools and tests that name or pick one.
enum class Collective : std::uint8_t {
  kAllreduce,
  kBroadcast,
  kAllgather,
  kAllgatherv,
  kReduceScatter,
  kAlltoall,
  kAlltoallv,
  kBarrier,
  // Rooted (appended, so the values above, which travel in call fingerprints, stay).
  kReduce,
  kGather,
  kGatherv,
  kScatter,
  kScatterv,
  kReduceScatterv
};
/// The function's name ("allreduce", "reduce_scatter", ...; "collective N" for other values).
std::string collective_name(Collective collective);

/// Allreduce algorithms; kAuto lets the cost model choose per call. kHierarchical (reduce-scatter
/// inside each host, allreduce across hosts, allgather inside each host) needs ranks on two or
/// more hosts with the same number of ranks on each, at least two. kHierarchical stays last:
/// argument validation treats every value above it as unknown.
enum class Algorithm : std::uint8_t {
  kAuto,
  kRing,
  kRecursiveDoubling,
  kTree,
  kRabenseifner,
  kHierarchical
};

/// Short name ("auto", "ring", "recursive_doubling", "tree", "rabenseifner", "hierarchical").
std::string_view algorithm_name(Algorithm algorithm);
/// Parses a name as printed by algorithm_name (also "rd", "rab" and "hier").
std::optional<Algorithm> parse_algorithm(std::string_view name);

/// How a communicator is built; empty/unset fields come from the environment.
struct CommunicatorOptions {
  /// "auto" (shared memory between ranks of one host, TCP across hosts), "tcp" or "shm" (a
  /// one-host job); empty: HOOP_TRANSPORT, else auto.
  std::string transport;
  /// Forces one allreduce algorithm; unset: HOOP_ALGO, else the cost model.
  std::optional<Algorithm> algorithm;
  /// Deadline of each collective; unset: HOOP_TIMEOUT_SECONDS.
  std::optional<std::chrono::milliseconds> timeout;
  /// Names this communicator's keys in the store, so that several communicators (process
  /// sets, control channels) can be built over one store; empty: the transport's default.
  std::string key_prefix;
};

/// A group of ranks that run collectives together, over one transport.
class Communicator {
 public:
  /// Joins the job the environment describes (hooprun, mpirun, Slurm; see bootstrap_from_env),
  /// connects to the store and builds the transport. A single-process job needs no store.
  static Result<std::unique_ptr<Communicator>> create(const CommunicatorOptions& options = {});
  /// Builds a communicator over an existing store connection (which must outlive it). Every
  /// rank must call it: the ranks agree on one small allreduce whether some host runs more
  /// ranks than it has cores, which changes the algorithms auto picks.
  static Result<std::unique_ptr<Communicator>> create(const BootstrapInfo& info, Store* store,
                                                      const CommunicatorOptions& options = {});
  virtual ~Communicator() = default;

  /// This rank.
  virtual int rank() const = 0;
  /// The number of ranks.
  virtual int size() const = 0;
  /// The transport the collectives run over.
  virtual Transport& transport() = 0;
  /// The algorithm forced by options or HOOP_ALGO, or kAuto.
  virtual Algorithm forced_algorithm() const = 0;
  /// The deadline of each collective.
  virtual std::chrono::milliseconds timeout() const = 0;
};

/// Passed as split()'s color by a rank that joins none of the new communicators.
inline constexpr int kNoColor = -1;

/// A new communicator over the ranks of `comm` that pass the same `color` (>= 0), ranked by
/// `key`, ties by their rank in `comm` (MPI_Comm_split, ncclCommSplit). Every rank of `comm`
/// calls it, like a collective; a rank passing kNoColor gets a null communicator. The new
/// communicator reuses `comm`'s connections, so both share one rule: their calls are made in
/// the same order on every rank they have in common (as calls on one communicator are), and
/// a failure in either fails both. It may outlive `comm`. Its collectives take the same
/// settings (algorithm, timeout); the hierarchical allreduce needs the job's own communicator.
Result<std::unique_ptr<Communicator>> split(Communicator& comm, int color, int key);
/// A communicator over the same ranks in the same order (MPI_Comm_dup): split(comm, 0, rank).
Result<std::unique_ptr<Communicator>> dup(Communicator& comm);

/// output[i] = op over ranks of input[i], on every rank.
struct AllreduceOptions {
  const void* input = nullptr;      ///< `count` elements; null or equal to output: in place
  void* output = nullptr;           ///< `count` elements
  std::size_t count = 0;            ///< elements per rank
  DataType dtype = DataType::kF32;  ///< the element type
  ReduceOp op = ReduceOp::kSum;     ///< the reduction
  /// kAuto: the communicator's forced algorithm, else the cost model.
  Algorithm algorithm = Algorithm::kAuto;
};
/// Allreduce; see AllreduceOptions.
Status allreduce(Communicator& comm, const AllreduceOptions& options);
/// The algorithm allreduce(comm, ...) runs for a buffer of `bytes` bytes when asked for
/// `requested` (kAuto: the communicator's forced algorithm, else the cost model's choice).
Algorithm allreduce_algorithm(Communicator& comm, std::size_t bytes,
                              Algorithm requested = Algorithm::kAuto);

/// One buffer of allreduce_list: `count` elements reduced from `input` (null: in place) into
/// `output`.
struct AllreduceBuffer {
  const void* input = nullptr;  ///< `count` elements; null: in place
  void* output = nullptr;       ///< `count` elements
  std::size_t count = 0;        ///< elements
};
/// An allreduce of host buffers as if they were one, their concatenation in order. The ranks'
/// totals must match; their lists may split them differently.
struct AllreduceListOptions {
  std::span<const AllreduceBuffer> buffers;  ///< in the order of their concatenation
  DataType dtype = DataType::kF32;           ///< the element type of every buffer
  ReduceOp op = ReduceOp::kSum;              ///< the reduction
};
/// Allreduce of a list of host buffers in one call, with auto's algorithm; the same result,
/// bit for bit, as allreduce of their concatenation. Where allreduce_list_reads() says so, each
/// rank reads the others' buffers where they lie (no copy into one buffer and out again);
/// elsewhere the buffers go through one buffer of the total.
Status allreduce_list(Communicator& comm, const AllreduceListOptions& options);
/// Whether allreduce_list of `bytes` in all reads the buffers where they lie: ranks on one host
/// that can read each other's memory, at the sizes where allreduce reads them too.
bool allreduce_list_reads(Communicator& comm, std::size_t bytes);

/// The constants of the alpha-beta-gamma cost model with which allreduce picks its algorithm,
/// for tools that predict what a job would cost (hoop-plan): alpha, the latency of one message;
/// beta, the transfer time per byte; gamma, the reduction time per byte.
struct CostModel {
  double alpha_s = 10e-6;            ///< alpha: seconds of latency per message
  double beta_s_per_byte = 1.0e-9;   ///< beta: seconds per byte transferred
  double gamma_s_per_byte = 0.2e-9;  ///< gamma: seconds per byte reduced
};
/// The constants allreduce uses: these defaults overridden by HOOP_ALPHA_US,
/// HOOP_BETA_NS_PER_BYTE and HOOP_GAMMA_NS_PER_BYTE; invalid_argument naming a malformed one.
Result<CostModel> cost_model_from_env();
/// The model's seconds for one allreduce of `bytes` bytes over `size` ranks with kRing,
/// kRecursiveDoubling, kRabenseifner or kTree (the prediction allreduce chooses by).
double predict_allreduce_seconds(Algorithm algorithm, int size, std::size_t bytes,
                                 const CostModel& model);
/// The model's seconds for the hierarchical allreduce over `hosts` hosts of `ranks_per_host`
/// ranks: `intra` between the ranks of a host, `inter` on a host's link (shared by its ranks).
double predict_hierarchical_allreduce_seconds(int hosts, int ranks_per_host, std::size_t bytes,
                                              const CostModel& intra, const CostModel& inter);
/// The algorithm allreduce picks for `bytes` bytes over `size` ranks under `model` (without a
/// forced one); `hierarchical`: the ranks span two or more hosts evenly.
Algorithm predicted_allreduce_choice(int size, std::size_t bytes, const CostModel& model,
                                     bool hierarchical = false);

/// Copies `count` elements of `buffer` on `root` into `buffer` on every other rank.
struct BroadcastOptions {
  void* buffer = nullptr;           ///< `count` elements: the root's input, the others' output
  std::size_t count = 0;            ///< elements
  DataType dtype = DataType::kF32;  ///< the element type
  int root = 0;                     ///< the rank whose buffer is copied
};
/// Broadcast; see BroadcastOptions.
Status broadcast(Communicator& comm, const BroadcastOptions& options);

/// output = concatenation over ranks (in rank order) of each rank's `count`-element input.
/// In place when input == output + rank * count (or input is null).
struct AllgatherOptions {
  const void* input = nullptr;      ///< this rank's `count` elements
  void* output = nullptr;           ///< size() * count elements
  std::size_t count = 0;            ///< elements per rank
  DataType dtype = DataType::kF32;  ///< the element type
};
/// Allgather; see AllgatherOptions.
Status allgather(Communicator& comm, const AllgatherOptions& options);

/// Allgather with a different count per rank: rank r contributes counts[r] elements, placed at
/// the sum of counts[0..r) in output. Every rank passes the same counts.
struct AllgathervOptions {
  const void* input = nullptr;          ///< counts[rank] elements
  void* output = nullptr;               ///< sum(counts) elements
  std::span<const std::size_t> counts;  ///< elements from each rank, one entry per rank
  DataType dtype = DataType::kF32;      ///< the element type
};
/// Allgatherv; see AllgathervOptions.
Status allgatherv(Communicator& comm, const AllgathervOptions& options);

/// Reduces size() * count input elements over ranks and leaves block `rank` (`count` elements,
/// at offset rank * count of the reduction) in output.
struct ReduceScatterOptions {
  const void* input = nullptr;      ///< size() * count elements
  void* output = nullptr;           ///< count elements
  std::size_t count = 0;            ///< elements per rank
  DataType dtype = DataType::kF32;  ///< the element type
  ReduceOp op = ReduceOp::kSum;     ///< the reduction
};
/// Reduce-scatter; see ReduceScatterOptions.
Status reduce_scatter(Communicator& comm, const ReduceScatterOptions& options);

/// Reduce-scatter with a different count per rank (MPI_Reduce_scatter): the input holds
/// sum(counts) elements on every rank, and rank r's output gets the reduction of the counts[r]
/// elements at the sum of counts[0..r). Every rank passes the same counts. In place when input
/// is null or equal to output (the output then holds all sum(counts) inputs and rank r's block
/// lands at its start).
struct ReduceScattervOptions {
  const void* input = nullptr;          ///< sum(counts) elements
  void* output = nullptr;               ///< counts[rank] elements (sum(counts) in place)
  std::span<const std::size_t> counts;  ///< elements of each rank's block, one entry per rank
  DataType dtype = DataType::kF32;      ///< the element type
  ReduceOp op = ReduceOp::kSum;         ///< the reduction
};
/// Reduce-scatter with per-rank counts; see ReduceScattervOptions.
Status reduce_scatterv(Communicator& comm, const ReduceScattervOptions& options);

/// Block j (`count` elements) of rank i's input becomes block i of rank j's output.
struct AlltoallOptions {
  const void* input = nullptr;      ///< size() * count elements
  void* output = nullptr;           ///< size() * count elements
  std::size_t count = 0;            ///< elements per pair of ranks
  DataType dtype = DataType::kF32;  ///< the element type
};
/// Alltoall; see AlltoallOptions.
Status alltoall(Communicator& comm, const AlltoallOptions& options);

/// Alltoall with per-pair counts: this rank sends send_counts[j] elements (packed in rank
/// order in input) to rank j and receives recv_counts[j] elements from rank j (packed in rank
/// order in output). send_counts[j] on rank i must equal recv_counts[i] on rank j.
struct AlltoallvOptions {
  const void* input = nullptr;               ///< sum(send_counts) elements
  std::span<const std::size_t> send_counts;  ///< elements to each rank, one entry per rank
  void* output = nullptr;                    ///< sum(recv_counts) elements
  std::span<const std::size_t> recv_counts;  ///< elements from each rank, one entry per rank
  DataType dtype = DataType::kF32;           ///< the element type
};
/// Alltoallv; see AlltoallvOptions.
Status alltoallv(Communicator& comm, const AlltoallvOptions& options);

/// Returns once every rank has entered the barrier.
Status barrier(Communicator& comm);

// Rooted collectives. Every rank passes the same root, count(s), dtype (and op); buffers that
// only the root reads or writes may be null on the other ranks.

/// Reduces every rank's `count`-element input into `output` on `root`. In place on the root
/// when its input equals its output (or is null); other ranks' output is not touched.
struct RootReduceOptions {
  const void* input = nullptr;      ///< `count` elements
  void* output = nullptr;           ///< `count` elements, on the root
  std::size_t count = 0;            ///< elements per rank
  DataType dtype = DataType::kF32;  ///< the element type
  ReduceOp op = ReduceOp::kSum;     ///< element-wise ops (not kAdasum)
  int root = 0;                     ///< the rank that receives the reduction
};
/// Reduce to one rank (MPI_Reduce, ncclReduce); see RootReduceOptions.
Status reduce(Communicator& comm, const RootReduceOptions& options);

/// The root's output = concatenation over ranks (in rank order) of each rank's `count`-element
/// input. In place on the root when its input is output + root * count (or null).
struct GatherOptions {
  const void* input = nullptr;      ///< this rank's `count` elements
  void* output = nullptr;           ///< size() * count elements, on the root
  std::size_t count = 0;            ///< elements per rank
  DataType dtype = DataType::kF32;  ///< the element type
  int root = 0;                     ///< the rank that gathers
};
/// Gather (MPI_Gather); see GatherOptions.
Status gather(Communicator& comm, const GatherOptions& options);

/// Gather with a different count per rank: rank r's counts[r] elements land at the sum of
/// counts[0..r) in the root's output. In place on the root when its input is where its own
/// block goes (or null).
struct GathervOptions {
  const void* input = nullptr;          ///< counts[rank] elements
  void* output = nullptr;               ///< sum(counts) elements, on the root
  std::span<const std::size_t> counts;  ///< elements from each rank, one entry per rank
  DataType dtype = DataType::kF32;      ///< the element type
  int root = 0;                         ///< the rank that gathers
};
/// Gatherv (MPI_Gatherv); see GathervOptions.
Status gatherv(Communicator& comm, const GathervOptions& options);

/// Block r (`count` elements) of the root's input becomes rank r's output. In place on the
/// root when its output is input + root * count (or null: its own block stays in the input).
struct ScatterOptions {
  const void* input = nullptr;      ///< size() * count elements, on the root
  void* output = nullptr;           ///< count elements
  std::size_t count = 0;            ///< elements per rank
  DataType dtype = DataType::kF32;  ///< the element type
  int root = 0;                     ///< the rank whose input is scattered
};
/// Scatter (MPI_Scatter); see ScatterOptions.
Status scatter(Communicator& comm, const ScatterOptions& options);

/// Scatter with a different count per rank: rank r receives counts[r] elements from the sum of
/// counts[0..r) in the root's input.
struct ScattervOptions {
  const void* input = nullptr;          ///< sum(counts) elements, on the root
  void* output = nullptr;               ///< counts[rank] elements
  std::span<const std::size_t> counts;  ///< elements to each rank, one entry per rank
  DataType dtype = DataType::kF32;      ///< the element type
  int root = 0;                         ///< the rank whose input is scattered
};
/// Scatterv (MPI_Scatterv); see ScattervOptions.
Status scatterv(Communicator& comm, const ScattervOptions& options);

// Point-to-point. Between two ranks, messages are received in the order they were sent (as
// with NCCL; the tag is checked, not used to pick a message): a recv whose tag, dtype or count
// differs from the send it meets fails, naming both sides' values, and aborts the
// communicator so that the sender fails with the same cause. send() returns once its data has
// left, which for large messages may need the peer's recv: two ranks that send to each other
// first must use sendrecv() (or order their calls). Only the two ranks take part; the others
// may make other calls meanwhile.

/// `count` elements of `data` to rank `peer` (not this rank).
struct SendOptions {
  const void* data = nullptr;       ///< the `count` elements to send
  std::size_t count = 0;            ///< elements
  DataType dtype = DataType::kF32;  ///< the element type
  int peer = 0;                     ///< the receiving rank
  std::int32_t tag = 0;             ///< checked against the matching receive's
};
/// Send (ncclSend, MPI_Send); see SendOptions.
Status send(Communicator& comm, const SendOptions& options);

/// `count` elements from rank `peer` into `data`.
struct RecvOptions {
  void* data = nullptr;             ///< where the `count` elements land
  std::size_t count = 0;            ///< elements
  DataType dtype = DataType::kF32;  ///< the element type
  int peer = 0;                     ///< the sending rank
  std::int32_t tag = 0;             ///< checked against the matching send's
};
/// Receive (ncclRecv, MPI_Recv); see RecvOptions.
Status recv(Communicator& comm, const RecvOptions& options);

/// A send and a receive in flight at once (MPI_Sendrecv), to the same or different peers.
Status sendrecv(Communicator& comm, const SendOptions& to, const RecvOptions& from);

// Non-blocking forms (MPI_Iallreduce and friends). Each starts its call and returns at once; a
// thread of the communicator runs the calls one at a time in the order they were started (as
// NCCL runs the calls of one communicator on its stream), so they overlap with the caller's own
// work and complete in that order, while their requests may be waited for in any order.
//
// Ordering across ranks: every rank starts the non-blocking calls of a communicator, and makes
// its blocking ones, in the same order, as for blocking calls alone. A blocking call on a
// communicator (or on one split from the same connections) with calls in flight first waits
// for them. The buffers, and the counts a v-form points to, stay valid and untouched until
// the request has completed. A call that fails aborts the communicator, so the calls started
// after it fail with the same cause. Destroying a communicator waits for its calls. There is
// no isend/irecv: on the one thread, a send started before a receive would wait for its peer
// to take it first; isendrecv moves both at once.

struct RequestState;

/// A non-blocking call in flight.
class Request {
 public:
  /// A request that stands for no call (valid() is false).
  Request() = default;
  /// A request on the call `state` tracks (the non-blocking functions make them).
  explicit Request(std::shared_ptr<RequestState> state) : state_(std::move(state)) {}
  /// Whether this request stands for a call (a default-constructed one does not).
  bool valid() const { return state_ != nullptr; }
  /// Without blocking: false while the call runs, true once it has succeeded, its error once it
  /// has failed (invalid_argument for an invalid request).
  Result<bool> test();
  /// Blocks until the call has finished and returns its status (again on a later wait).
  Status wait();

 private:
  std::shared_ptr<RequestState> state_;
};

/// Waits for every request in `requests` and returns the first failure among them.
Status wait_all(std::span<Request> requests);

/// Non-blocking allreduce(): starts the call and returns its Request.
Request iallreduce(Communicator& comm, const AllreduceOptions& options);
/// Non-blocking broadcast(): starts the call and returns its Request.
Request ibroadcast(Communicator& comm, const BroadcastOptions& options);
/// Non-blocking allgather(): starts the call and returns its Request.
Request iallgather(Communicator& comm, const AllgatherOptions& options);
/// Non-blocking allgatherv(): starts the call and returns its Request.
Request iallgatherv(Communicator& comm, const AllgathervOptions& options);
/// Non-blocking reduce_scatter(): starts the call and returns its Request.
Request ireduce_scatter(Communicator& comm, const ReduceScatterOptions& options);
/// Non-blocking reduce_scatterv(): starts the call and returns its Request.
Request ireduce_scatterv(Communicator& comm, const ReduceScattervOptions& options);
/// Non-blocking alltoall(): starts the call and returns its Request.
Request ialltoall(Communicator& comm, const AlltoallOptions& options);
/// Non-blocking alltoallv(): starts the call and returns its Request.
Request ialltoallv(Communicator& comm, const AlltoallvOptions& options);
/// Non-blocking barrier(): starts the call and returns its Request.
Request ibarrier(Communicator& comm);
/// Non-blocking reduce(): starts the call and returns its Request.
Request ireduce(Communicator& comm, const RootReduceOptions& options);
/// Non-blocking gather(): starts the call and returns its Request.
Request igather(Communicator& comm, const GatherOptions& options);
/// Non-blocking gatherv(): starts the call and returns its Request.
Request igatherv(Communicator& comm, const GathervOptions& options);
/// Non-blocking scatter(): starts the call and returns its Request.
Request iscatter(Communicator& comm, const ScatterOptions& options);
/// Non-blocking scatterv(): starts the call and returns its Request.
Request iscatterv(Communicator& comm, const ScattervOptions& options);
/// Non-blocking sendrecv(): starts the call and returns its Request.
Request isendrecv(Communicator& comm, const SendOptions& to, const RecvOptions& from);

}  // namespace hoop
