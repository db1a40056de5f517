// One timeline event per Communicator collective (HOOP_TIMELINE): the call's kind, bytes,
// algorithm where there is a choice, transport and rank count, on a row of its own.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "core/timeline.h"
#include "hoop/communicator.h"

namespace hoop::collectives {

/// Begins the event when constructed (or at start(), for a call whose algorithm is chosen
/// later) and ends it when destroyed. Costs one atomic load where no timeline is active.
class Trace {
 public:
  /// `bytes`: what each rank contributes (nccl-tests' size). With `deferred`, nothing is
  /// written until start().
  Trace(Communicator& comm, Collective kind, std::size_t bytes, bool deferred = false)
      : comm_(comm), kind_(kind), bytes_(bytes) {
    // Most jobs write no timeline: one relaxed load, inline, on every collective then.
    if (Timeline::any_active()) [[unlikely]]
      attach(deferred);
  }
  ~Trace() {
    if (begun_) [[unlikely]]
      end();
  }
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  /// Begins the event, naming the algorithm that runs (once; later calls do nothing).
  void start(std::string_view algorithm = {});

 private:
  /// Takes the active timeline, if any, and begins the event unless `deferred`.
  void attach(bool deferred);
  /// Ends the begun event.
  void end();

  Communicator& comm_;
  Collective kind_;
  std::size_t bytes_;
  std::shared_ptr<Timeline> timeline_;  // null: no active timeline, nothing to write
  bool begun_ = false;
};

}  // namespace hoop::collectives
