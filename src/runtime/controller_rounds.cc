// A process set's control connections (controller.h): the rounds of negotiation over them
// (contributions out, peers' contributions held, a complete round fed to the coordinator), the
// goodbyes after the shutdown round, and the heartbeats that prove every peer alive.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/coarse_clock.h"
#include "core/scale.h"
#include "runtime/controller.h"

namespace hoop::runtime {
namespace {

// A control message longer than this is a corrupt length, not a list of tensors.
constexpr std::uint64_t kMaxControlMessage = std::uint64_t{1} << 32;
// The length field of a heartbeat's frame, which carries no message.
constexpr std::uint64_t kHeartbeat = ~std::uint64_t{0};
// How often liveness is looked at.
constexpr std::chrono::milliseconds kLivenessCheck{50};
// How long a rank with nothing outstanding waits before it answers a round its peers began
// with an empty contribution: ranks that submit the same tensors a little apart then meet in
// one round instead of two (an empty answer, then a round of its own).
constexpr std::chrono::milliseconds kIdleAnswer{1};

}  // namespace

Status Controller::send_to_peers(std::string_view payload) {
  Transport& t = control_->transport();
  const std::size_t inline_bytes = std::min(payload.size(), kFrameInline);
  ControlFrame frame;
  frame.length = payload.size();
  std::memcpy(frame.bytes.data(), payload.data(), inline_bytes);
  // Every send is posted before any is waited for: the peers read theirs meanwhile.
  std::vector<RequestId>& ids = send_ids_;
  ids.clear();
  const auto now = coarse_now();
  for (int peer : peers_) {
    if (inline_bytes == payload.size()) {
      HOOP_ASSIGN_OR_RETURN(ids.emplace_back(), t.send(peer, &frame, sizeof(frame)));
    } else {
      HOOP_ASSIGN_OR_RETURN(ids.emplace_back(), t.send_more(peer, &frame, sizeof(frame)));
      HOOP_ASSIGN_OR_RETURN(ids.emplace_back(), t.send(peer, payload.data() + inline_bytes,
                                                       payload.size() - inline_bytes));
    }
    last_sent_[static_cast<std::size_t>(peer)] = now;
  }
  return t.wait(ids, now + control_->timeout());
}

Status Controller::post_header_recv(int peer) {
  HeaderRecv& h = headers_[static_cast<std::size_t>(peer)];
  HOOP_ASSIGN_OR_RETURN(h.id, control_->transport().recv(peer, &h.frame, sizeof(h.frame)));
  return Status::success();
}

Result<std::string_view> Controller::read_body(int peer, const ControlFrame& frame,
                                               Deadline deadline) {
  const std::uint64_t length = frame.length;
  if (length > kMaxControlMessage)
    return protocol_error(
        fmt::format("runtime: rank {} announced a control message of {} bytes", peer, length));
  if (length <= kFrameInline)
    return std::string_view(frame.bytes.data(), static_cast<std::size_t>(length));
  body_.resize(static_cast<std::size_t>(length));
  std::memcpy(body_.data(), frame.bytes.data(), kFrameInline);
  Transport& t = control_->transport();
  HOOP_ASSIGN_OR_RETURN(RequestId rest,
                        t.recv(peer, body_.data() + kFrameInline, body_.size() - kFrameInline));
  HOOP_RETURN_IF_ERROR(wait_one(t, rest, deadline));
  return std::string_view(body_);
}

Result<bool> Controller::poll_messages() {
  bool moved = false;
  Transport& t = control_->transport();
  for (int peer : peers_) {
    HeaderRecv& h = headers_[static_cast<std::size_t>(peer)];
    if (h.id == 0) continue;
    HOOP_ASSIGN_OR_RETURN(bool complete, t.test(h.id));
    if (!complete) continue;
    h.id = 0;
    const auto now = coarse_now();
    last_heard_[static_cast<std::size_t>(peer)] = now;
    if (h.frame.length == kHeartbeat) {
      HOOP_RETURN_IF_ERROR(post_header_recv(peer));
      continue;
    }
    HOOP_ASSIGN_OR_RETURN(std::string_view payload,
                          read_body(peer, h.frame, now + control_->timeout()));
    moved = true;
    if (h.frame.length == 0) {
      // The peer has completed the shutdown round ahead of this rank: nothing follows.
      goodbye_[static_cast<std::size_t>(peer)] = true;
      continue;
    }
    HeldRounds& held = held_[static_cast<std::size_t>(peer)];
    // This round's and the next: a peer is never further ahead.
    if (held.count == 2)
      return protocol_error(fmt::format(
          "runtime: rank {} sent a third round of negotiation while rank {} was in the first", peer,
          rank_));
    // Decoded before the next frame's receive is posted: the payload may lie in this one.
    Held& next = held.next();
    HOOP_RETURN_IF_ERROR(decode_request_list(payload, next.list));
    next.at = Clock::now();
    ++held.count;
    HOOP_RETURN_IF_ERROR(post_header_recv(peer));
  }
  return moved;
}

Result<bool> Controller::advance() {
  bool moved = false;
  while (!done_) {
    if (!sent_) {
      // Made in place, its room kept from the last round.
      mine_.clear();
      const bool fresh = collect(mine_);
      if (next_tuning_) {
        mine_.tuning = next_tuning_;
        next_tuning_.reset();
      }
      if (!fresh && !mine_.tuning && !answer_due()) break;
      HOOP_RETURN_IF_ERROR(contribute());
      moved = true;
    }
    for (int peer : peers_)
      if (held_[static_cast<std::size_t>(peer)].empty()) return moved;
    HOOP_RETURN_IF_ERROR(finish_round());
    moved = true;
  }
  return moved;
}

bool Controller::answer_due() const {
  auto oldest = Clock::time_point::max();
  for (const auto& held : held_) {
    if (held.empty()) continue;
    if (held.front().list.shutdown) return true;
    oldest = std::min(oldest, held.front().at);
  }
  if (oldest == Clock::time_point::max()) return false;
  return has_outstanding() || Clock::now() - oldest >= kIdleAnswer;
}

Status Controller::contribute() {
  // The peers' coordinators see the slots in the order they decode them, which for a bit
  // vector is ascending: this rank's must count them in the same order.
  std::sort(mine_.cached.begin(), mine_.cached.end());
  HOOP_RETURN_IF_ERROR(carry_inputs(mine_));
  if (size_ > 1) {
    encode(mine_, encoded_);
    HOOP_RETURN_IF_ERROR(send_to_peers(encoded_));
  }
  sent_ = true;
  return Status::success();
}

Status Controller::carry_inputs(RequestList& mine) {
  if (carry_.empty()) return Status::success();
  // In the order of `cached`, the order every coordinator takes them in.
  std::sort(carry_.begin(), carry_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  CarryBudget budget;
  Status s;
  for (const auto& [slot, e] : carry_) {
    const Request& r = e->request;
    const std::size_t at = budget.used();
    if (!budget.take(r)) continue;
    mine.carries = true;
    mine.carried.resize(budget.used());
    s = scale_copy(mine.carried.data() + at, e->input.data, r.count(), r.dtype, r.prescale);
    if (!s.ok()) break;
  }
  carry_.clear();
  return s;
}

Status Controller::finish_round() {
  const auto now = coarse_now();
  for (int r = 0; r < size_; ++r) {
    const bool own = r == rank_;
    auto& held = held_[static_cast<std::size_t>(r)];
    const RequestList& list = own ? mine_ : held.front().list;
    if (r == 0 && list.tuning) apply(*list.tuning);
    HOOP_RETURN_IF_ERROR(coordinator_->add(r, list, own ? now : held.front().at));
  }
  for (int peer : peers_) held_[static_cast<std::size_t>(peer)].pop_front();
  sent_ = false;
  if (!coordinator_->has_ready()) return Status::success();
  coordinator_->take_ready(responses_);
  HOOP_RETURN_IF_ERROR(run_responses(responses_));
  if (tuner_) autotune(responses_);
  if (!done_ || size_ == 1) return Status::success();
  HOOP_RETURN_IF_ERROR(say_goodbye());
  return collect_goodbyes();
}

Status Controller::say_goodbye() {
  // An empty message completes the receive each peer keeps posted for this rank, so that no
  // rank closes its transport with a request still pending (which would abort).
  return send_to_peers("");
}

Status Controller::collect_goodbyes() {
  Transport& t = control_->transport();
  const Deadline deadline = coarse_now() + control_->timeout();
  for (int peer : peers_) {
    if (goodbye_[static_cast<std::size_t>(peer)]) continue;
    HeaderRecv& h = headers_[static_cast<std::size_t>(peer)];
    while (true) {
      HOOP_RETURN_IF_ERROR(wait_one(t, h.id, deadline));
      if (h.frame.length == kHeartbeat) {
        HOOP_RETURN_IF_ERROR(post_header_recv(peer));
        continue;
      }
      HOOP_RETURN_IF_ERROR(read_body(peer, h.frame, deadline).status());
      if (h.frame.length == 0) break;
      return protocol_error(fmt::format(
          "runtime: rank {} sent a round of negotiation after the shutdown round", peer));
    }
    h.id = 0;
  }
  return Status::success();
}

Status Controller::send_heartbeats() {
  Transport& t = control_->transport();
  const auto now = coarse_now();
  for (int peer : peers_) {
    auto& sent = last_sent_[static_cast<std::size_t>(peer)];
    if (now - sent < heartbeat_) continue;
    sent = now;
    ControlFrame frame;
    frame.length = kHeartbeat;
    HOOP_ASSIGN_OR_RETURN(RequestId id, t.send(peer, &frame, sizeof(frame)));
    HOOP_RETURN_IF_ERROR(wait_one(t, id, now + control_->timeout()));
  }
  return Status::success();
}

Status Controller::check_liveness() {
  const auto now = coarse_now();
  if (now - last_liveness_check_ < kLivenessCheck) return Status::success();
  last_liveness_check_ = now;
  HOOP_RETURN_IF_ERROR(send_heartbeats());
  const auto limit = control_->timeout();
  for (int peer : peers_) {
    const auto quiet = now - last_heard_[static_cast<std::size_t>(peer)];
    if (quiet <= limit) continue;
    return peer_lost(fmt::format(
        "runtime: rank {} has not answered for {:.1f} s (the limit is HOOP_TIMEOUT_SECONDS={}): "
        "it is stopped, hung or cut off",
        peer, std::chrono::duration<double>(quiet).count(),
        std::chrono::duration<double>(limit).count()));
  }
  return Status::success();
}

}  // namespace hoop::runtime
