// The store's requests: set, get, delete, add, and waits parked until their keys exist.
#include <algorithm>

#include "rendezvous/store_server_impl.h"

namespace hoop::rendezvous {

void StoreServerImpl::handle_request(Connection& c, std::uint8_t op, std::string_view payload) {
  namespace rv = rendezvous;
  auto decoded = rv::decode_request(op, payload);
  if (!decoded.ok()) {
    if (decoded.status().code() == StatusCode::kProtocolError) {
      return refuse(c, decoded.status(), /*auth=*/false);
    }
    return send(c, rv::encode_error(decoded.status()));
  }
  const rv::Request& req = *decoded;
  switch (req.op) {
    case Opcode::kSet:
      if (req.key.size() + req.value.size() > options_.max_value_bytes) {
        return send(c, rv::encode_error(invalid_argument(fmt::format(
                           "key {} and its value take {} bytes; the store's limit is {}",
                           rv::quote_key(req.key), req.key.size() + req.value.size(),
                           options_.max_value_bytes))));
      }
      data_.insert_or_assign(std::string(req.key), std::string(req.value));
      send(c, rv::encode_ok());
      return notify_waiters(req.key);
    case Opcode::kGet: {
      auto it = data_.find(req.key);
      if (it != data_.end()) return send(c, rv::encode_ok(it->second));
      return send(c, rv::encode_error(not_found(
                         fmt::format("store key {} is not set", rv::quote_key(req.key)))));
    }
    case Opcode::kDelete: {
      auto it = data_.find(req.key);
      const bool existed = it != data_.end();
      if (existed) data_.erase(it);
      return send(c,
                  rv::encode_ok(existed ? std::string_view("\1", 1) : std::string_view("\0", 1)));
    }
    case Opcode::kAdd:
      return handle_add(c, req);
    case Opcode::kWait:
      return handle_wait(c, req);
    default:
      return refuse(c, internal_error("decode_request let an unknown opcode through"), false);
  }
}

void StoreServerImpl::handle_add(Connection& c, const rendezvous::Request& req) {
  auto it = data_.find(req.key);
  auto sum =
      rendezvous::add_to_counter(req.key, it == data_.end() ? nullptr : &it->second, req.delta);
  if (!sum.ok()) return send(c, rendezvous::encode_error(sum.status()));
  if (it != data_.end()) {
    it->second = std::to_string(*sum);
  } else {
    data_.emplace(std::string(req.key), std::to_string(*sum));
  }
  send(c, rendezvous::encode_ok_i64(*sum));
  notify_waiters(req.key);
}

template <typename Keys>
bool StoreServerImpl::all_set(const Keys& keys) const {
  return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return data_.contains(k); });
}

void StoreServerImpl::handle_wait(Connection& c, const rendezvous::Request& req) {
  if (all_set(req.keys)) return send(c, rendezvous::encode_ok());
  c.wait_keys.assign(req.keys.begin(), req.keys.end());
  c.waiting = true;
  // Every key is watched, not just the missing ones: one may be deleted before the others
  // arrive, and its return must still be noticed.
  for (const std::string& key : c.wait_keys) waiters_by_key_[key].insert(c.id);
  const std::uint64_t capped_ms = std::min<std::uint64_t>(req.timeout_ms, INT64_MAX / 2);
  set_timer(c,
            net::deadline_after(std::chrono::milliseconds(static_cast<std::int64_t>(capped_ms))));
  if (req.timeout_ms == 0) finish_wait(c, /*timed_out=*/true);
}

void StoreServerImpl::notify_waiters(std::string_view key) {
  auto it = waiters_by_key_.find(key);
  if (it == waiters_by_key_.end()) return;
  // finish_wait edits the index, so work from a copy.
  const std::vector<std::uint64_t> ids(it->second.begin(), it->second.end());
  for (const std::uint64_t id : ids) {
    Connection* c = find(id);
    if (c != nullptr && c->waiting && all_set(c->wait_keys)) finish_wait(*c, /*timed_out=*/false);
  }
}

void StoreServerImpl::finish_wait(Connection& c, bool timed_out) {
  unwatch(c);
  clear_timer(c);
  c.waiting = false;
  if (timed_out) {
    std::vector<std::string_view> missing;
    for (const std::string& key : c.wait_keys) {
      if (!data_.contains(key)) missing.push_back(key);
    }
    send(c, rendezvous::encode_wait_timeout(missing));
  } else {
    send(c, rendezvous::encode_ok());
  }
  c.wait_keys.clear();
  to_resume_.push_back(c.id);
}

void StoreServerImpl::unwatch(Connection& c) {
  for (const std::string& key : c.wait_keys) {
    auto it = waiters_by_key_.find(key);
    if (it == waiters_by_key_.end()) continue;
    it->second.erase(c.id);
    if (it->second.empty()) waiters_by_key_.erase(it);
  }
}

}  // namespace hoop::rendezvous
