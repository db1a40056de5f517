// The store client: one blocking TCP connection, one request in flight at a time (a mutex
// serializes callers), every read and write bounded by a poll() deadline. A failure that
// leaves the byte stream out of step (a timeout mid-answer, a lost server) makes the
// connection unusable, and every later call says why instead of reading a stale answer.
#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "core/crypto.h"
#include "core/socket.h"
#include "hoop/rendezvous.h"
#include "rendezvous/store_protocol.h"

namespace hoop {
namespace {

using rendezvous::Opcode;

// How long past its own timeout a wait may take for the server's answer to arrive.
constexpr std::chrono::milliseconds kWaitAnswerMargin{2000};

struct Frame {
  std::uint8_t op = 0;
  std::string payload;
};

// Reads one frame whose payload may be at most `cap` bytes.
Result<Frame> read_frame(int fd, std::size_t cap, net::Deadline deadline, std::string_view peer) {
  char header_bytes[rendezvous::kFrameHeaderBytes];
  HOOP_RETURN_IF_ERROR(net::read_exact(fd, header_bytes, sizeof header_bytes, deadline, peer));
  const auto header = rendezvous::decode_header(header_bytes);
  if (header.length > cap) {
    return protocol_error(fmt::format("{} sent a {} frame of {} bytes; the limit is {}", peer,
                                      rendezvous::opcode_name(header.op), header.length, cap));
  }
  Frame frame;
  frame.op = header.op;
  frame.payload.resize(header.length);
  HOOP_RETURN_IF_ERROR(
      net::read_exact(fd, frame.payload.data(), frame.payload.size(), deadline, peer));
  return frame;
}

bool is(const Frame& frame, Opcode op) { return frame.op == static_cast<std::uint8_t>(op); }

class StoreClient final : public Store {
 public:
  StoreClient(Fd fd, std::string peer, StoreOptions options)
      : fd_(std::move(fd)), peer_(std::move(peer)), options_(std::move(options)) {}

  // Runs the client side of the handshake; called once, before the object is shared.
  Status handshake(int rank, net::Deadline deadline) {
    HOOP_ASSIGN_OR_RETURN(Frame first,
                          read_frame(fd_.get(), rendezvous::kMaxHandshakePayload, deadline, peer_));
    if (is(first, Opcode::kError)) return refusal(rendezvous::decode_error(first.payload));
    if (!is(first, Opcode::kServerHello)) {
      return protocol_error(fmt::format("{} opened with a {} frame instead of its hello", peer_,
                                        rendezvous::opcode_name(first.op)));
    }
    auto server_hello = rendezvous::decode_server_hello(first.payload);
    if (!server_hello.ok()) return server_hello.status().with_context(peer_);

    rendezvous::ClientHello hello;
    hello.rank = rank;
    hello.job_id = options_.job_id;
    HOOP_ASSIGN_OR_RETURN(hello.nonce, crypto::random_bytes(rendezvous::kNonceBytes));
    const rendezvous::HandshakeTranscript transcript{
        rendezvous::kProtocolVersion, server_hello->nonce, hello.nonce, hello.job_id, rank};
    HOOP_ASSIGN_OR_RETURN(
        const auto proof,
        rendezvous::handshake_proof(rendezvous::ProofRole::kClient, options_.secret, transcript));
    hello.proof = crypto::as_view(proof);
    // Sent even when the versions differ: the server then refuses with both versions named
    // and logs the attempt, which helps whoever runs it.
    const std::string frame = rendezvous::encode_client_hello(hello);
    HOOP_RETURN_IF_ERROR(net::write_exact(fd_.get(), frame.data(), frame.size(), deadline, peer_));

    HOOP_ASSIGN_OR_RETURN(Frame answer,
                          read_frame(fd_.get(), rendezvous::kMaxHandshakePayload, deadline, peer_));
    if (is(answer, Opcode::kError)) return refusal(rendezvous::decode_error(answer.payload));
    if (server_hello->version != rendezvous::kProtocolVersion) {
      return auth_failed(fmt::format("{} speaks protocol version {}, this client version {}", peer_,
                                     server_hello->version, rendezvous::kProtocolVersion));
    }
    if (!is(answer, Opcode::kServerProof)) {
      return protocol_error(fmt::format("{} answered the hello with a {} frame", peer_,
                                        rendezvous::opcode_name(answer.op)));
    }
    HOOP_ASSIGN_OR_RETURN(
        const auto expected,
        rendezvous::handshake_proof(rendezvous::ProofRole::kServer, options_.secret, transcript));
    if (!crypto::constant_time_equal(crypto::as_view(expected), answer.payload)) {
      return auth_failed(fmt::format(
          "{} could not prove it knows the job secret; refusing to talk to it (an impostor, "
          "or the store of a job with another secret)",
          peer_));
    }
    return Status::success();
  }

  Status set(std::string_view key, std::string_view value) override {
    HOOP_RETURN_IF_ERROR(rendezvous::validate_key(key));
    if (key.size() + value.size() > options_.max_value_bytes) {
      return invalid_argument(fmt::format(
          "store set {}: key and value take {} bytes; the limit is {} "
          "(StoreOptions::max_value_bytes)",
          rendezvous::quote_key(key), key.size() + value.size(), options_.max_value_bytes));
    }
    const std::string label = "set " + rendezvous::quote_key(key);
    HOOP_ASSIGN_OR_RETURN(Frame answer,
                          call(rendezvous::encode_set(key, value), options_.timeout, label));
    return expect_ok(answer, label);
  }

  Result<std::string> get(std::string_view key) override {
    HOOP_RETURN_IF_ERROR(rendezvous::validate_key(key));
    const std::string label = "get " + rendezvous::quote_key(key);
    HOOP_ASSIGN_OR_RETURN(Frame answer, call(rendezvous::encode_get(key), options_.timeout, label));
    HOOP_RETURN_IF_ERROR(expect_ok(answer, label));
    return std::move(answer.payload);
  }

  Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    if (timeout.count() < 0) {
      return invalid_argument(fmt::format("store wait: negative timeout {} ms", timeout.count()));
    }
    std::size_t total = 0;
    for (const std::string& key : keys) {
      HOOP_RETURN_IF_ERROR(rendezvous::validate_key(key));
      total += key.size();
    }
    if (keys.empty()) return Status::success();
    if (total > options_.max_value_bytes) {
      return invalid_argument(fmt::format("store wait: {} keys of {} bytes in all; the limit is {}",
                                          keys.size(), total, options_.max_value_bytes));
    }
    const auto margin = std::min(options_.timeout, kWaitAnswerMargin);
    const auto budget =
        timeout < std::chrono::milliseconds::max() - margin ? timeout + margin : timeout;
    const std::string label = "wait for " + rendezvous::format_keys(keys);
    HOOP_ASSIGN_OR_RETURN(Frame answer, call(rendezvous::encode_wait(
                                                 keys, static_cast<std::uint64_t>(timeout.count())),
                                             budget, label));
    if (is(answer, Opcode::kWaitTimeout)) {
      auto missing = rendezvous::decode_wait_timeout(answer.payload);
      if (!missing.ok()) return missing.status().with_context(peer_);
      return timeout_error(fmt::format("store wait timed out after {} ms; missing keys: {}",
                                       timeout.count(), rendezvous::format_keys(*missing)));
    }
    return expect_ok(answer, label);
  }

  Result<std::int64_t> add(std::string_view key, std::int64_t delta) override {
    HOOP_RETURN_IF_ERROR(rendezvous::validate_key(key));
    const std::string label = "add " + rendezvous::quote_key(key);
    HOOP_ASSIGN_OR_RETURN(Frame answer,
                          call(rendezvous::encode_add(key, delta), options_.timeout, label));
    HOOP_RETURN_IF_ERROR(expect_ok(answer, label));
    auto value = rendezvous::decode_ok_i64(answer.payload);
    if (!value.ok()) return value.status().with_context(peer_);
    return value;
  }

  Result<bool> remove(std::string_view key) override {
    HOOP_RETURN_IF_ERROR(rendezvous::validate_key(key));
    const std::string label = "delete " + rendezvous::quote_key(key);
    HOOP_ASSIGN_OR_RETURN(Frame answer,
                          call(rendezvous::encode_delete(key), options_.timeout, label));
    HOOP_RETURN_IF_ERROR(expect_ok(answer, label));
    if (answer.payload.size() != 1 || static_cast<std::uint8_t>(answer.payload[0]) > 1) {
      return protocol_error(fmt::format("{} sent a malformed answer to {}", peer_, label));
    }
    return answer.payload[0] == 1;
  }

 private:
  // The server's reason for refusing the handshake, named after the store. Refusals for a
  // wrong secret, job id or version arrive as kAuthFailed and stay so.
  Status refusal(const Status& reason) const {
    return Status(reason.code(),
                  fmt::format("{} refused this client: {}", peer_, reason.message()));
  }

  // Sends one request and reads its answer, all within `budget`, which also bounds the wait
  // for a call already in flight on this connection. `label` names the request in errors.
  Result<Frame> call(const std::string& request, std::chrono::milliseconds budget,
                     std::string_view label) {
    const net::Deadline deadline = net::deadline_after(budget);
    std::unique_lock<std::timed_mutex> lock(mu_, std::defer_lock);
    if (!lock.try_lock_until(deadline)) {
      // Nothing was sent, so the connection stays usable.
      return timeout_error(fmt::format(
          "{}: {} waited {} ms for an earlier call on the same store connection to finish "
          "(a long wait?)",
          peer_, label, budget.count()));
    }
    if (!broken_.ok()) {
      return Status(broken_.code(), fmt::format("{}: connection unusable after an earlier "
                                                "failure: {}",
                                                label, broken_.message()));
    }
    const std::size_t cap = rendezvous::max_frame_payload(options_.max_value_bytes);
    Status sent = net::write_exact(fd_.get(), request.data(), request.size(), deadline, peer_);
    if (!sent.ok()) {
      // A server that refuses a request mid-frame (over its size limit) answers with its
      // reason before it closes; that reason beats "connection closed".
      auto reason = sent.code() == StatusCode::kPeerLost
                        ? read_frame(fd_.get(), cap, deadline, peer_)
                        : Result<Frame>(sent);
      if (reason.ok() && is(*reason, Opcode::kError)) {
        broken_ = rendezvous::decode_error(reason->payload);
        return broken_;
      }
      return fail(sent, label, budget);
    }
    auto answer = read_frame(fd_.get(), cap, deadline, peer_);
    if (!answer.ok()) return fail(answer.status(), label, budget);
    // The server ends the connection after a protocol error; later calls must not use it.
    if (is(*answer, Opcode::kError)) {
      const Status error = rendezvous::decode_error(answer->payload);
      if (error.code() == StatusCode::kProtocolError) broken_ = error;
    }
    return answer;
  }

  // Marks the connection out of step and names the request that was in flight.
  Status fail(const Status& cause, std::string_view label, std::chrono::milliseconds budget) {
    if (cause.code() == StatusCode::kTimeout) {
      broken_ = timeout_error(
          fmt::format("{} did not answer {} within {} ms", peer_, label, budget.count()));
    } else {
      broken_ = Status(cause.code(), fmt::format("{} (during {})", cause.message(), label));
    }
    return broken_;
  }

  // Ok for a kOk answer; the server's error for kError; protocol_error otherwise.
  Status expect_ok(const Frame& answer, std::string_view label) const {
    if (is(answer, Opcode::kOk)) return Status::success();
    if (is(answer, Opcode::kError)) return rendezvous::decode_error(answer.payload);
    return protocol_error(fmt::format("{} answered {} with a {} frame", peer_, label,
                                      rendezvous::opcode_name(answer.op)));
  }

  std::timed_mutex mu_;
  Fd fd_;
  const std::string peer_;  // "store at host:port"
  const StoreOptions options_;
  Status broken_;
};

}  // namespace

Result<std::unique_ptr<Store>> Store::connect(const std::string& host, std::uint16_t port,
                                              StoreOptions options, int rank) {
  if (options.secret.empty()) {
    return invalid_argument("store client: the job secret must not be empty (HOOP_SECRET)");
  }
  if (options.job_id.size() > rendezvous::kMaxJobIdBytes) {
    return invalid_argument(fmt::format("store client: job id of {} bytes; the limit is {}",
                                        options.job_id.size(), rendezvous::kMaxJobIdBytes));
  }
  if (options.timeout.count() <= 0) {
    return invalid_argument("store client: timeout must be positive");
  }
  const net::Deadline deadline = net::deadline_after(options.timeout);
  const std::string peer = "store at " + net::format_host_port(host, port);
  auto fd = net::connect_tcp(host, port, deadline);
  if (!fd.ok()) return fd.status().with_context("could not reach the rendezvous store");
  auto client = std::make_unique<StoreClient>(std::move(fd).value(), peer, std::move(options));
  const Status handshake = client->handshake(rank, deadline);
  if (handshake.code() == StatusCode::kTimeout || handshake.code() == StatusCode::kPeerLost) {
    return Status(handshake.code(), handshake.message() + " (during the handshake)");
  }
  HOOP_RETURN_IF_ERROR(handshake);
  return std::unique_ptr<Store>(std::move(client));
}

Result<std::string> Store::wait_get(std::string_view key, std::chrono::milliseconds timeout) {
  HOOP_RETURN_IF_ERROR(wait({std::string(key)}, timeout));
  return get(key);
}

}  // namespace hoop
