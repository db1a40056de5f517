// What the Communicator side of the C ABI shares: the structs behind hoop_comm_t and
// hoop_request_t, and call<C>(), which every collective's C functions are one-liners over. C (a
// Described) names the one place the collective's C arguments become C++ options and its two
// C++ forms, so its blocking and non-blocking C functions differ only in the mode they pass.
#pragma once

#include <memory>
#include <type_traits>

#include "c_abi.h"
#include "hoop/communicator.h"

struct hoop_comm {
  std::unique_ptr<hoop::Communicator> comm;
};

struct hoop_request {
  hoop::Request request;
};

namespace hoop::c_abi {

/// The C++ forms of a collective over its options type `O`.
template <typename O>
using RunFn = Status (*)(Communicator&, const O&);
template <typename O>
using StartFn = Request (*)(Communicator&, const O&);

/// One collective as call<> sees it: kBuild, a function `Result<O>(const Communicator&, <the C
/// arguments>...)` that is the one place its C arguments become C++ options, and its C++
/// forms. kStart is null for the calls that have no non-blocking form (send, recv), so that
/// asking for one does not compile.
template <typename O, auto kBuild, RunFn<O> kRun, auto kStart = nullptr>
struct Described {
  using Options = O;
  static constexpr auto build = kBuild;
  static constexpr auto run = kRun;
  static constexpr auto start = kStart;
  // From the type, not the pointer's value: under the sanitizers a function's address is not a
  // constant expression.
  static constexpr bool can_start = !std::is_null_pointer_v<decltype(kStart)>;
  static_assert(!can_start || std::is_same_v<decltype(kStart), StartFn<O>>);
};

/// call<C>'s mode: run the blocking form and return its status.
struct Blocking {};
/// call<C>'s mode: start the non-blocking form and hand its request out through *out (NULL
/// whenever nothing was started).
struct Start {
  hoop_request_t** out;
};

/// Builds C's options from `args` for `comm` and runs or starts the call, as `mode` says, at
/// the C boundary.
template <typename C, typename Mode, typename... Args>
hoop_status_t call(hoop_comm_t* comm, Mode mode, const Args&... args) noexcept {
  return guard([&]() -> Status {
    if constexpr (std::is_same_v<Mode, Start>) {
      static_assert(C::can_start, "this call has no non-blocking form");
      // Before anything starts: a call started on this rank alone, whose request the caller
      // could not see, would stay in the order every rank must keep.
      HOOP_RETURN_IF_ERROR(check_not_null(mode.out, "request"));
      *mode.out = nullptr;
    }
    HOOP_RETURN_IF_ERROR(check_not_null(comm, "comm"));
    Communicator& c = *comm->comm;
    HOOP_ASSIGN_OR_RETURN(const typename C::Options options, C::build(c, args...));
    if constexpr (std::is_same_v<Mode, Blocking>) {
      return C::run(c, options);
    } else {
      // Allocated first: once started, the call cannot be taken back for want of memory.
      auto request = std::make_unique<hoop_request>();
      request->request = C::start(c, options);
      *mode.out = request.release();
      return Status::success();
    }
  });
}

}  // namespace hoop::c_abi
