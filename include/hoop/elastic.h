/// @file
/// hoop's elastic training: a job whose ranks may leave and join while it runs.
///
/// hooprun --host-discovery-script starts an elastic job (README, "Elastic training"). Each
/// membership of the job is a round: when a rank is lost, or the discovery script lists a new
/// host, hooprun publishes a new round, and the workers of the old one move to it without
/// restarting. A lost rank shows on the others as a failed collective; run() catches it, puts
/// the state back to its last commit(), leaves the round, joins the next one (shutdown() and
/// init() with new ranks, sizes and layout), copies the state from the new rank 0 and calls the
/// training function again. A grown job shows at the next commit(): every rank of it raises
/// HostsUpdated at the same commit, and run() moves them to the new round the same way, minus
/// the restore. New workers start in the new round and receive the state from rank 0.
///
/// This mirrors Horovod's elastic API (hvd.elastic.run, State.commit/restore/sync,
/// HostsUpdatedInterrupt); hoop.torch.elastic wraps it for PyTorch.
///
/// After a reset only the global process set exists: re-create other sets in a reset callback.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "hoop/core.h"

/// Elastic training: jobs whose ranks may leave and join while they run.
namespace hoop::elastic {

/// Whether this process is a worker of an elastic job (hooprun set HOOP_ELASTIC_ID).
bool enabled();
/// The round of the job this process is in; -1 outside an elastic job or before init().
int round();

/// Whether a failure is one a reset can recover from: a lost peer, a timeout, a broken
/// connection or an operation aborted by them; not bad arguments, ranks that disagree on a
/// tensor or a bug, which would fail again in the next round.
bool recoverable(const Status& status);

/// Tells hooprun (the job's driver) that this worker's round failed with `cause`, before it
/// resets: when no worker of the round ends (a peer stopped or hung, a link cut), the reports
/// are how the driver learns the round is over and which worker stopped answering. run() does
/// it itself; a binding with its own loop (hoop.torch.elastic) calls it. Does nothing outside
/// an elastic job or before init().
void report_failure(const Status& cause);

/// Whether hooprun has published a round newer than this process's. A collective over the
/// global set: every rank calls it at the same point and all get the same answer.
bool hosts_updated();

/// Leaves the current round and joins the next: shutdown(), then init() in the newest round
/// after this one, waiting up to HOOP_ELASTIC_TIMEOUT for hooprun to publish it. Throws
/// hoop::Error (kAborted) when hooprun removed this worker, and its timeout when no round came.
void reset();

/// Thrown by State::commit() and State::check_host_updates() on every rank when
/// hosts_updated(): run() moves the job to the new round and continues from the state as it is.
class HostsUpdated : public Error {
 public:
  /// The interruption: an Error with kAborted saying that hooprun published a new round.
  HostsUpdated();
};

/// The training state that survives a reset: named buffers in host memory (parameters,
/// optimizer buffers, epoch and batch counters) that commit() saves, restore() puts back and
/// sync() copies from rank 0 to every rank. The same names must be added on every rank.
class State {
 public:
  /// A state with no buffers.
  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  virtual ~State() = default;

  /// Adds `bytes` bytes of host memory at `data`, which must stay valid while the State is used.
  void add(const std::string& name, void* data, std::size_t bytes);
  /// Adds a trivially copyable value (a counter).
  template <typename T>
  void add_value(const std::string& name, T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    add(name, &value, sizeof(T));
  }
  /// Saves a copy of every buffer (the point restore() returns to), then check_host_updates().
  void commit();
  /// Saves a copy of every buffer.
  virtual void save();
  /// Puts the last saved copies back (nothing before the first save).
  virtual void restore();
  /// Copies every buffer from rank 0 to the other ranks, then saves. A collective.
  virtual void sync();
  /// Throws HostsUpdated when hosts_updated(). A collective.
  void check_host_updates();
  /// Adds a function that run() calls after each reset, in the new round (re-shard the data
  /// with the new rank and size, re-create process sets).
  void register_reset_callback(std::function<void()> callback);
  /// Runs the reset callbacks in the order they were added.
  void on_reset();

 private:
  struct Buffer {
    void* data = nullptr;
    std::size_t bytes = 0;
    std::vector<std::byte> saved;
  };
  std::map<std::string, Buffer> buffers_;
  std::vector<std::function<void()>> callbacks_;
  bool saved_ = false;
};

/// Runs `train` to its end through resets: init() (when needed), state.sync(), train(); when
/// train throws a recoverable hoop::Error, state.restore(); on HostsUpdated, nothing; then
/// reset(), state.on_reset() and again from sync(). Outside an elastic job a failure is
/// rethrown, as is one that is not recoverable. Returns when train returns.
void run(State& state, const std::function<void()>& train);

}  // namespace hoop::elastic
