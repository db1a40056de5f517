// One process set's background thread: collects the tensors this rank submits, negotiates
// them with the set's other ranks over a control communicator, and runs the responses on a
// data communicator in the order the negotiation chose.
//
// Negotiation in rounds: a rank that has something new (tensors, a join, a shutdown) sends it
// to every other rank as its contribution to the next round, and a rank that receives a
// round's first contribution answers with its own, empty where it has nothing new (a rank
// with nothing outstanding waits a millisecond first: it may be about to submit). Once a rank
// holds every rank's contribution to a round it feeds them, in rank order, to its own
// Coordinator, and runs what that makes ready. Every rank's coordinator sees the same lists
// in the same order, so all of them make the same responses in the same order, with no rank
// in between: a tensor is negotiated in one hop when the ranks submit it together (a round
// trip through rank 0 took two). A rank sends its next contribution only once the round it
// took part in is complete, so a peer is never more than one round ahead.
//
// Waking: the thread sleeps in its control transport's poll(), which returns as soon as a
// message arrives or a submission calls wake(). After anything moved it keeps polling for
// HOOP_SPIN_US, yielding the core between polls, since the next message usually follows
// closely. A rank without outstanding work answers a round that is a millisecond old at its
// next cycle: nothing it has not submitted can run before then anyway.
//
// Liveness: the threads of a set say they are alive over the control connections (a
// message, or a heartbeat frame, at least every heartbeat interval; a collective that
// completes proves every rank alive too), so that a rank that stopped answering (SIGSTOP, a
// hung process, a cut link) fails every rank within HOOP_TIMEOUT_SECONDS naming it, apart from
// a rank that is alive but has not submitted a tensor yet (the stall inspector's business).
//
// Driving: the thread's passes (step()) may also run on an application thread that waits on a
// handle of the set (Driver, handle_state.h): a lone tensor then goes out, is negotiated and
// runs on the thread that waits for it, with no wake-up of the background thread and no
// hand-off back. Whoever runs a pass holds the gate's mutex, which guards the thread's own
// state below. Where the control transport can wait for messages without moving bytes
// (Transport::await_activity), the background thread sleeps there without the mutex, so a
// waiting thread can always take it; elsewhere it sleeps in poll() holding it, and a waiting
// thread leaves the work to it.
//
// Batching: after waking, the thread keeps collecting tensors for as long as they keep
// arriving back to back (less than kBurstGap apart), at most HOOP_CYCLE_TIME_MS, and stops
// as soon as an application thread waits on a handle (no more are coming then); then it
// sends them in one message. A lone tensor followed by its wait goes out at once.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/timeline.h"
#include "hoop/communicator.h"
#include "hoop/rendezvous.h"
#include "runtime/autotune.h"
#include "runtime/coordinator.h"
#include "runtime/executor.h"
#include "runtime/handle_state.h"

namespace hoop::runtime {

/// Settings every controller of a job shares (from the HOOP_* runtime variables).
struct RuntimeSettings {
  std::size_t fusion_threshold = std::size_t{128} << 20;
  std::chrono::microseconds cycle{1000};
  std::size_t cache_capacity = 1024;
  std::chrono::milliseconds stall_check{60000};      // 0: off
  std::chrono::milliseconds stall_shutdown{600000};  // 0: off
  std::chrono::microseconds spin{200};
  std::string timeline_path;
  std::size_t timeline_max_bytes = 0;
  bool timeline_mark_cycles = false;
  bool autotune = false;  // the global set's rank 0 runs the autotuner
  AutotuneOptions autotune_options;
};

/// Reads RuntimeSettings from the environment; invalid_argument naming a malformed variable.
Result<RuntimeSettings> runtime_settings_from_env();

/// Bytes of a control message that travel in its frame: a frame of two cache lines, which
/// holds a lone tensor's list and the bit vector of up to 880 cached tensors. (A 256-byte frame
/// cost a lone 8 B allreduce through the runtime 2-3 % more, in the lines the receiver reads.)
inline constexpr std::size_t kFrameInline = 120;

/// What a rank sends over a control connection, one transport message of a fixed size: the
/// message's length and its first bytes. A message longer than the frame holds follows it with
/// the rest as a second transport message; a negotiation's messages (a few tensors, or cached
/// ones by slot) fit, so that each costs one send and one receive, and the receiver learns a
/// message and its length at once instead of posting the body's receive after the length's.
struct ControlFrame {
  std::uint64_t length = 0;  // the message's bytes, or ~0 for a heartbeat (no message)
  std::array<char, kFrameInline> bytes{};
};

class Controller {
 public:
  /// Builds the set's communicators through `store` (keys under "<prefix>/..."; null for a
  /// one-rank set) and starts the thread. `info` describes this rank within the set.
  static Result<std::unique_ptr<Controller>> start(const BootstrapInfo& info, Store* store,
                                                   const std::string& prefix,
                                                   const RuntimeSettings& settings,
                                                   Timeline& timeline);
  /// Stops the thread; work still pending fails (call shutdown() first for a clean stop).
  ~Controller();

  int rank() const { return rank_; }
  int size() const { return size_; }

  /// Queues entries sharing one handle. A name already pending on this rank, or a runtime
  /// that has failed or shut down, is an error and nothing is queued.
  Status submit(std::vector<Entry> entries) { return submit(std::span<Entry>(entries)); }
  /// submit() of one tensor, without a vector around it (the common case of a training loop).
  Status submit(Entry entry) { return submit(std::span<Entry>(&entry, 1)); }
  /// Queues this rank's join; the handle finishes once every rank of the set has joined.
  Status join(std::shared_ptr<detail::HandleState> handle);
  /// The next barrier's tensor name (the same sequence on every rank).
  std::string next_barrier_name();
  /// Negotiates the end with every rank of the set, then stops the thread.
  Status shutdown();

 private:
  Controller(int rank, int size, const RuntimeSettings& settings, Timeline& timeline);
  /// Moves the entries into the queue (on success).
  Status submit(std::span<Entry> entries);
  void loop();
  /// One pass: local work out, messages in, responses out and run. True if anything moved.
  Result<bool> step();
  /// step() unless the runtime has stopped, failed or ended; a failure fails everything.
  enum class Pass : std::uint8_t { kMoved, kIdle, kEnd };
  Pass run_pass();
  /// Takes queued work into a message (batching bursts); false when there was none.
  bool collect(RequestList& out);
  /// Puts a taken entry into the message (by its cache slot where it has one) and into
  /// pending_.
  void record(Entry& e, RequestList& out);
  /// Sends one control message to every peer.
  Status send_to_peers(std::string_view payload);
  /// Reads every complete message: peers' contributions are held for their round.
  Result<bool> poll_messages();
  /// Contributes to the round when this rank has something new or a peer has begun it, and
  /// completes rounds while every contribution is at hand. True if anything moved.
  Result<bool> advance();
  /// Whether this rank answers the round its peers began: at once when it waits for work of
  /// its own or a peer shuts down, else once the round is kIdleAnswer old.
  bool answer_due() const;
  /// Sends this rank's contribution to the current round (mine_) to every peer.
  Status contribute();
  /// Puts the inputs of the list's small cached allreduces (carry_) into it, where they fit.
  Status carry_inputs(RequestList& mine);
  /// Feeds the round's contributions to the coordinator in rank order and runs what is ready.
  Status finish_round();
  Status post_header_recv(int peer);
  /// The message whose frame has arrived: its inline bytes where they lie, or the whole
  /// message read into body_ where it is longer; valid until the peer's next frame is posted.
  Result<std::string_view> read_body(int peer, const ControlFrame& frame, Deadline deadline);
  /// After the shutdown list: an empty message to every peer, and the wait for theirs.
  Status say_goodbye();
  Status collect_goodbyes();
  Status run_responses(const ResponseList& list);
  /// Gives the autotuner the allreduce bytes of a list that has run; what it picks goes out
  /// with rank 0's next contribution.
  void autotune(const ResponseList& list);
  /// A contribution's tuning (rank 0's), from the round it arrives in.
  void apply(const Tuning& tuning);
  void check_stall();
  /// Sends a heartbeat to each peer that has heard nothing from this rank for an interval.
  Status send_heartbeats();
  /// peer_lost naming a peer this rank has not heard from for longer than the timeout.
  Status check_liveness();
  /// Why work fails once the runtime has stopped: a rank's shutdown, named, or this rank's
  /// own; the caller holds mu_.
  Status stopped(std::string_view what) const;
  void fail_everything(const Status& cause);
  bool has_outstanding() const;
  /// The background thread's wait for work; releases `drive` (held on entry).
  void idle_wait(bool active, std::unique_lock<std::mutex>& drive);
  /// An application thread's passes, with the gate held: until `done` or `until`.
  void drive(const std::atomic<bool>& done, Clock::time_point until);
  /// The background thread's wait while an application thread drives: until the next cycle
  /// or a wake-up, deaf to messages (the driver takes them).
  void stand_by();
  /// How long the background thread dozes without anyone to wake it: a cycle, within bounds.
  std::chrono::microseconds idle_cycle() const;
  /// Wakes the background thread, or makes its next sleep end at once.
  void wake_background();
  /// A handle will complete by callback, with no thread waiting on it: wakes a sleeping
  /// background thread to send it now.
  void hand_over();

  /// The gate, as what a waiting thread drives (HandleState::driver).
  std::shared_ptr<detail::Driver> driver() const;

  struct Gate;
  std::shared_ptr<Gate> gate_;

  int rank_;
  int size_;
  RuntimeSettings settings_;
  Timeline& timeline_;
  std::unique_ptr<Communicator> control_;
  std::unique_ptr<Communicator> data_;
  std::unique_ptr<Executor> executor_;
  ResponseCache cache_;
  // Every rank's, fed the same rounds in the same order; rank 0's alone reports stalls.
  std::unique_ptr<Coordinator> coordinator_;
  std::optional<Autotuner> tuner_;     // rank 0 with HOOP_AUTOTUNE only
  std::optional<Tuning> next_tuning_;  // rank 0: goes out with its next contribution

  // Shared with the submitting threads.
  std::mutex mu_;
  std::vector<Entry> queue_;
  // collect()'s vector, kept between calls: swapped in as the next queue_, so a training step's
  // burst of submissions lands in a vector that already has room instead of growing one anew
  // (the thread running the passes, under the gate).
  std::vector<Entry> spare_queue_;
  std::atomic<std::uint64_t> submitted_{0};
  bool join_queued_ = false;
  std::shared_ptr<detail::HandleState> join_handle_;
  bool shutdown_queued_ = false;
  bool stopped_ = false;
  // Where the background thread sleeps: in poll() holding the gate (submit() wakes it), or in
  // await_activity() without it (it looks at the queue every cycle, and a thread that stops
  // driving wakes it).
  enum class Sleep : std::uint8_t { kAwake, kPolling, kAwaiting };
  Sleep sleep_ = Sleep::kAwake;
  Status failure_;         // once set, everything fails with it
  std::unordered_set<std::string> in_flight_;  // names submitted and not finished
  // Nodes of in_flight_ (here) and pending_ (spare_entries_, under the gate) that finished,
  // kept for the next submissions: a training loop submits the same tensors every step, and
  // reusing the nodes spares two allocations and two frees per tensor.
  std::vector<std::unordered_set<std::string>::node_type> spare_names_;
  std::uint64_t barriers_ = 0;

  // The thread's own state, guarded by the gate's mutex (whoever runs a pass).
  std::unordered_map<std::string, Entry> pending_;  // sent, waiting for a response
  std::vector<std::unordered_map<std::string, Entry>::node_type> spare_entries_;
  std::vector<Entry*> run_entries_;  // run_responses()'s, kept for their capacity
  // The collected list's cached tensors whose inputs may go with it (carried_in_negotiation),
  // by slot; their entries are in pending_.
  std::vector<std::pair<std::uint32_t, const Entry*>> carry_;
  std::vector<RequestId> send_ids_;  // send_to_peers()'s
  std::vector<std::unordered_map<std::string, Entry>::node_type> run_nodes_;
  struct HeaderRecv {
    RequestId id = 0;
    ControlFrame frame;
  };
  std::vector<int> peers_;  // every other rank of the set, the ones it exchanges messages with
  std::vector<HeaderRecv> headers_;  // by peer: the posted receive of the next message's frame
  // The round: whether this rank has sent its contribution (kept in mine_ until the round is
  // complete), and each peer's contributions that arrived, the current round's first (a peer
  // that completed the round may already have sent its next one).
  bool sent_ = false;
  RequestList mine_;
  struct Held {
    RequestList list;
    Clock::time_point at;  // when it arrived (the coordinator's stall clock)
  };
  // A peer's held contributions, two places taken in turn and never destroyed: their lists
  // keep their room from round to round, and a lone tensor's round allocates nothing for them.
  struct HeldRounds {
    std::array<Held, 2> at;
    std::size_t first = 0;
    std::size_t count = 0;
    bool empty() const { return count == 0; }
    const Held& front() const { return at[first]; }
    Held& next() { return at[(first + count) % 2]; }  // where the next one is decoded
    void pop_front() {
      first = (first + 1) % 2;
      --count;
    }
  };
  std::vector<HeldRounds> held_;
  std::string encoded_;        // this rank's contribution, encoded (its room kept between rounds)
  ResponseList responses_;     // the round's, made in the room of the last round's
  std::string body_;           // a peer's contribution longer than its frame's inline bytes
  std::vector<bool> goodbye_;  // by peer: its last message (after a shutdown) has arrived
  bool joined_ = false;
  bool shutting_down_ = false;
  bool done_ = false;
  int shutdown_by_ = -1;  // the rank whose shutdown ended the runtime, once it has
  std::chrono::milliseconds heartbeat_{1000};
  std::vector<Clock::time_point> last_heard_;  // by peer
  std::vector<Clock::time_point> last_sent_;   // by peer
  Clock::time_point last_liveness_check_;
  Clock::time_point last_activity_;
  Clock::time_point last_stall_check_;
  // The background thread's alone.
  bool can_await_ = true;  // the control transport has await_activity()
  int idle_awaits_ = 0;    // awaits in a row that returned early and found nothing to do
  Clock::time_point activity_seen_;  // last_activity_ at the last await
  std::atomic<std::int64_t> cycle_us_;  // settings_.cycle, for the thread outside the gate
  std::thread thread_;
};

}  // namespace hoop::runtime
