#include <cstring>

#include "hoop/core.h"

namespace hoop {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kTimeout:
      return "timeout";
    case StatusCode::kPeerLost:
      return "peer lost";
    case StatusCode::kAuthFailed:
      return "authentication failed";
    case StatusCode::kProtocolError:
      return "protocol error";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kMismatch:
      return "mismatch";
    case StatusCode::kIoError:
      return "I/O error";
    case StatusCode::kAborted:
      return "aborted";
    case StatusCode::kInternal:
      return "internal error";
  }
  return "unknown status";
}

Status::Status(StatusCode code, std::string message)
    : code_(code),
      message_(message.empty() ? nullptr
                               : std::make_shared<const std::string>(std::move(message))) {}

const std::string& Status::message() const {
  static const std::string empty;
  return message_ != nullptr ? *message_ : empty;
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string out(status_code_name(code_));
  if (!message().empty()) {
    out += ": ";
    out += message();
  }
  return out;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  std::string msg(context);
  msg += ": ";
  msg += message();
  return Status(code_, std::move(msg));
}

Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
Status timeout_error(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
Status peer_lost(std::string m) { return {StatusCode::kPeerLost, std::move(m)}; }
Status auth_failed(std::string m) { return {StatusCode::kAuthFailed, std::move(m)}; }
Status protocol_error(std::string m) { return {StatusCode::kProtocolError, std::move(m)}; }
Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
Status mismatch_error(std::string m) { return {StatusCode::kMismatch, std::move(m)}; }
Status io_error(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
Status aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

Status errno_error(std::string_view what, int errnum) {
  char buf[128];
  // GNU strerror_r may return a static string instead of filling buf.
  const char* text = strerror_r(errnum, buf, sizeof buf);
  std::string msg(what);
  msg += ": ";
  msg += text;
  return io_error(std::move(msg));
}

Error::Error(Status status) : std::runtime_error(status.to_string()), status_(std::move(status)) {}

void throw_if_error(const Status& status) {
  if (!status.ok()) throw Error(status);
}

}  // namespace hoop
