// The timeline: a Chrome trace of each tensor's phases (negotiation, the collective, copies) and
// of each Communicator collective, written as it happens so that a job that hangs or dies still
// leaves a readable trace.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/fd.h"
#include "hoop/core.h"

namespace hoop {

/// Writes a Chrome trace-event JSON file (chrome://tracing, Perfetto). The file is a JSON array
/// that is complete after every event: each write replaces the closing "]" with the event and a
/// new "]", in one pwrite, so the file parses even when the process is killed. Thread-safe.
/// (One exception: Linux copies a write page by page and stops between pages once SIGKILL is
/// pending, so a kill inside a write that crosses a 4 KiB boundary cuts the file there.)
class Timeline {
 public:
  /// A timeline that writes nothing until start() (HOOP_TIMELINE=DYNAMIC, or a rank that
  /// writes no file). `pid` is the rank (the trace's process id). `max_bytes` > 0 bounds each
  /// file's size: an event that would pass it is dropped, and once that happens one instant
  /// event named "TIMELINE_TRUNCATED" is written (the bound reserves room for it).
  static std::unique_ptr<Timeline> idle(int pid, std::size_t max_bytes);
  /// idle(pid, max_bytes) started on `path` at once.
  static Result<std::unique_ptr<Timeline>> open(const std::string& path, int pid,
                                                std::size_t max_bytes);
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;
  ~Timeline();

  /// Creates (truncates) `path` and writes every later event there (a process_name metadata
  /// event "rank N" first; timestamps count from here), closing the file written so far, which
  /// stays a complete trace. `mark_cycles`: cycle() writes its marks. Fails (io_error naming
  /// the path and strerror) when the file cannot be created, and (invalid_argument) when
  /// max_bytes is too small to hold even the first event and the truncation marker; the
  /// timeline is stopped then.
  Status start(const std::string& path, bool mark_cycles = false);
  /// Stops writing and closes the file (a complete trace). Nothing when not started.
  void stop();
  /// Whether events are being written.
  bool active() const { return active_.load(std::memory_order_acquire); }
  /// Whether any timeline of the process is writing (a cheap check before any other).
  static bool any_active();

  /// Starts phase `phase` (e.g. "NEGOTIATE", "ALLREDUCE") on the row of tensor `tensor` (each
  /// tensor name gets its own row: a trace "tid", with a thread_name metadata event the first
  /// time the name is seen). `args` is a list of key/value string pairs written as the event's
  /// "args" object (may be empty).
  void begin(std::string_view tensor, std::string_view phase,
             const std::vector<std::pair<std::string, std::string>>& args = {});
  /// Ends the phase begun last on `tensor`'s row (nothing when no phase is open there).
  void end(std::string_view tensor);
  /// An instant event on `tensor`'s row.
  void instant(std::string_view tensor, std::string_view name);
  /// Marks the start of a background-thread cycle (a batch of tensors sent for negotiation) as
  /// an instant event "CYCLE_START" across the trace, when started with mark_cycles.
  void cycle();
  /// Bytes written so far (the file's size).
  std::size_t bytes() const;

 private:
  struct Row {
    int tid = 0;
    std::vector<std::string> open_phases = {};  // E events repeat their B's name, for readability
  };

  Timeline(int pid, std::size_t max_bytes);
  // Sets active_ and keeps the process's count of active timelines; caller holds mu_.
  void set_active(bool active);

  // The row of `tensor`; a new one gets a thread_name metadata event appended to `events`.
  Row& row(std::string_view tensor, std::string& events);
  // Writes `events` (each preceded by ",\n") in place of the closing bracket, or drops them
  // when they would pass the bound; a failed write logs once and stops the timeline. Caller
  // holds mu_.
  void append(const std::string& events);
  // Microseconds since open, as a JSON number with nanosecond digits.
  std::string timestamp() const;

  const int pid_;
  const std::size_t max_bytes_;      // 0: unbounded
  const std::size_t reserve_;        // the longest truncation marker, kept free below max_bytes_
  std::atomic<bool> active_{false};  // read without mu_ so that an idle timeline costs nothing
  mutable std::mutex mu_;
  Fd fd_;
  std::string path_;
  bool mark_cycles_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::size_t size_ = 0;  // the file's size; the last bytes are the closing bracket
  bool stopped_ = false;  // truncated or a write failed: nothing more is written
  int next_tid_ = 1;      // tid 0 holds process-wide events (metadata, the truncation marker)
  std::map<std::string, Row, std::less<>> rows_;  // std::less<>: found by string_view
};

/// Where the Communicator's collectives write their events: the runtime's timeline while
/// hoop::init() holds one, else the process's own (open_process_timeline); null when none is
/// set. Events go only where the timeline is active.
std::shared_ptr<Timeline> collectives_timeline();
/// Makes `timeline` the collectives' (null: none) and returns the one it replaces.
std::shared_ptr<Timeline> set_collectives_timeline(std::shared_ptr<Timeline> timeline);
/// For a program without the runtime: where HOOP_TIMELINE names a file (not DYNAMIC) and no
/// timeline is set yet, opens the process's own for rank `rank` (rank 0 writes the file, or
/// every rank its own where the path holds "%r"; HOOP_TIMELINE_MAX_BYTES bounds it). io_error
/// naming HOOP_TIMELINE when the file cannot be created.
Status open_process_timeline(int rank);

}  // namespace hoop
