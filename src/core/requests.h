// The bookkeeping every transport does with the requests it has handed out (a map from
// RequestId to the transport's own Request, which has a `Status status`): the checks and the
// consuming that the Transport contract asks of wait() and test(), in one place, so that each
// transport keeps only what is its own (how a request makes progress and when it is done).
#pragma once

#include <fmt/format.h>

#include <span>
#include <string_view>

#include "hoop/transport.h"

namespace hoop {

/// invalid_argument naming `transport` and the first of `ids` that `requests` does not hold
/// (unknown, or consumed by an earlier wait or test).
template <typename Map>
Status check_requests_known(const Map& requests, std::span<const RequestId> ids,
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
template <typename Map>
Status consume_requests(Map& requests, std::span<const RequestId> ids) {
  Status first;
  for (RequestId id : ids) {
    auto it = requests.find(id);
    if (it == requests.end()) continue;  // listed twice
    if (first.ok()) first = it->second.status;
    requests.erase(it);
  }
  return first;
}

/// Transport::test() over `requests`: for a known request, `progress()` runs once while it is
/// not `done(request)`; a finished request is consumed and gives its status (true when it
/// succeeded), an unfinished one false. `progress` may add and remove other requests.
template <typename Map, typename Done, typename Progress>
Result<bool> test_request(Map& requests, RequestId id, std::string_view transport, Done done,
                          Progress progress) {
  HOOP_RETURN_IF_ERROR(
      check_requests_known(requests, std::span<const RequestId>(&id, 1), transport));
  if (!done(requests.at(id))) progress();
  auto it = requests.find(id);
  if (!done(it->second)) return false;
  const Status s = it->second.status;
  requests.erase(it);
  if (!s.ok()) return s;
  return true;
}

}  // namespace hoop
