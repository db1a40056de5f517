// hooprun's exit codes besides the ones it passes on from a rank (its code, or 128 + signal).
// They follow the shell's conventions so that job scripts can tell the cases apart.
#pragma once

namespace hoop::launch {

inline constexpr int kExitSuccess = 0;
/// hooprun itself failed (the store did not start, a system call failed).
inline constexpr int kExitFailure = 1;
/// Bad arguments or a malformed HOOP_* variable in hooprun's environment.
inline constexpr int kExitUsage = 2;
/// The program exists but cannot be executed (permission, format).
inline constexpr int kExitCannotExecute = 126;
/// The program does not exist.
inline constexpr int kExitNotFound = 127;
/// Added to a signal number, as a shell does for a process killed by that signal.
inline constexpr int kExitSignalBase = 128;

}  // namespace hoop::launch
