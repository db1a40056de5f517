// UCX's handlers of fatal signals (internal to transports/ucx).
//
// libucs installs handlers for SIGSEGV, SIGBUS, SIGILL and SIGFPE when it is loaded, which is
// whenever libhoop is, UCX transport in use or not: a crash in the user's own program then
// printed "Caught signal 11" and a backtrace from libucs.so, pointing at UCX. So at load this
// module puts back the default action for every fatal signal whose handler lies in libucs,
// keeping what it took, unless the user asked for UCX's error handling (UCX_HANDLE_ERRORS is
// set) or for the ucx transport (HOOP_TRANSPORT=ucx). A UCX transport that connects puts them
// back (restore_error_handlers), so a job that uses UCX keeps UCX's crash reports.
#pragma once

namespace hoop::ucx {

/// Reinstalls the handlers taken off at load, for each signal whose action is still the
/// default one (a handler the program installed since stays). Idempotent.
void restore_error_handlers();

/// How many fatal-signal handlers of libucs were taken off at load (for tests).
int error_handlers_taken();

}  // namespace hoop::ucx
