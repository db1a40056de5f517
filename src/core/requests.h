// The bookkeeping every transport does with the requests it has handed out (a RequestTable of
// the transport's own Request, which has a `Status status`): the checks and the
// consuming that the Transport contract asks of wait() and test(), in one place, so that each
// transport keeps only what is its own (how a request makes progress and when it is done).
#pragma once

#include <fmt/format.h>

#include <span>
#include <string_view>

#include "core/request_table.h"
#include "hoop/transport.h"

namespace hoop {

/// invalid_argument naming `transport` and the first of `ids` that `requests` does not hold
/// (unknown, or consumed by an earlier wait or test).
template <typename Request>
Status check_requests_known(const RequestTable<Request>& requests, std::span<const RequestId> ids,
                            std::string_view transport) {
  for (RequestId id : ids) {
    if (!requests.contains(id))
      return invalid_argument(
          fmt::format("{}: request {} is unknown or already consumed", transport, id));
  }
  return Status::success();
}

/// Removes the listed requests (an id listed twice, once) and returns the first failure among
/// them: the end of a wait() whose requests have all finished.
template <typename Request>
Status consume_requests(RequestTable<Request>& requests, std::span<const RequestId> ids) {
  Status first;
  for (RequestId id : ids) {
    const Request* r = requests.find(id);
    if (r == nullptr) continue;  // listed twice
    if (first.ok() && !r->status.ok()) first = r->status;
    requests.erase(id);
  }
  return first;
}

/// Transport::test() over `requests`: for a known request, `progress()` runs once while it is
/// not `done(request)`; a finished request is consumed and gives its status (true when it
/// succeeded), an unfinished one false. `progress` may add and remove other requests.
template <typename Request, typename Done, typename Progress>
Result<bool> test_request(RequestTable<Request>& requests, RequestId id, std::string_view transport,
                          Done done, Progress progress) {
  HOOP_RETURN_IF_ERROR(
      check_requests_known(requests, std::span<const RequestId>(&id, 1), transport));
  if (!done(requests.at(id))) progress();
  const Request& r = requests.at(id);
  if (!done(r)) return false;
  const Status s = r.status;
  requests.erase(id);
  if (!s.ok()) return s;
  return true;
}

}  // namespace hoop
