// Set-up of the UCX transport: context, worker and address published through the store, an
// endpoint per peer with peer error handling; and the options read from the environment.
#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "core/config.h"
#include "core/log.h"
#include "core/host_id.h"
#include "transports/ucx/ucx_conn.h"
#include "transports/ucx/ucx_signals.h"

namespace hoop::ucx {
namespace {

std::string key(const UcxOptions& o, int rank) {
  return fmt::format("{}/addr/{}", o.key_prefix, rank);
}

std::chrono::milliseconds remaining(Deadline deadline) {
  return std::max(std::chrono::milliseconds{0},
                  std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()));
}

Status ucs_error(std::string_view what, ucs_status_t status) {
  return io_error(fmt::format("ucx: {}: {}", what, ucs_text(status)));
}

/// What a rank publishes: job id, host id and pid on lines of their own, then the worker
/// address (binary, to the end).
struct Record {
  std::string job_id;
  std::string host_id;
  int pid = -1;
  std::string address;
};

std::string encode(const Record& r) {
  return fmt::format("{}\n{}\n{}\n", r.job_id, r.host_id, r.pid) + r.address;
}

Result<Record> decode(const std::string& value, int rank) {
  Record r;
  std::size_t at = 0;
  std::string fields[3];
  for (std::string& f : fields) {
    const std::size_t end = value.find('\n', at);
    if (end == std::string::npos) {
      return protocol_error(fmt::format("ucx: rank {}'s address record is malformed", rank));
    }
    f = value.substr(at, end - at);
    at = end + 1;
  }
  r.job_id = fields[0];
  r.host_id = fields[1];
  r.pid = std::atoi(fields[2].c_str());
  r.address = value.substr(at);
  if (r.address.empty()) {
    return protocol_error(fmt::format("ucx: rank {}'s address record has no address", rank));
  }
  return r;
}

/// A pidfd for `pid`, or an invalid Fd when the kernel cannot give one (the peer is then
/// watched through UCX's endpoint errors alone).
Fd open_pidfd(int pid) {
#ifdef SYS_pidfd_open
  const long fd = ::syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) return Fd(static_cast<int>(fd));
  HOOP_LOG(kDebug, "ucx: pidfd_open({}) failed: {}", pid, std::strerror(errno));
#endif
  return Fd();
}

void on_endpoint_error(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  // Runs inside ucp_worker_progress; the transport acts on it once progress returns.
  static_cast<Peer*>(arg)->ep_error = status == UCS_OK ? UCS_ERR_CONNECTION_RESET : status;
}

Status check_arguments(int rank, int size, std::span<const int> peers, const std::string& job_id,
                       const UcxOptions& o) {
  if (size < 1 || size > kMaxRanks || rank < 0 || rank >= size) {
    return invalid_argument(fmt::format("ucx: rank {} of {} is not a valid rank", rank, size));
  }
  std::set<int> seen;
  for (int p : peers) {
    if (p < 0 || p >= size || p == rank || !seen.insert(p).second) {
      return invalid_argument(fmt::format(
          "ucx: peer {} of rank {} is out of range, the rank itself or listed twice", p, rank));
    }
  }
  if (job_id.empty() || job_id.find('\n') != std::string::npos || o.key_prefix.empty()) {
    return invalid_argument(
        "ucx: the job id must be non-empty without newlines and the key prefix not empty");
  }
  return Status::success();
}

/// Creates the context and the worker from UCX's own configuration (UCX_* variables).
Result<std::unique_ptr<Ucp>> open_worker(std::size_t peers) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return ucs_error("reading the UCX configuration (UCX_* variables)", st);
  auto ucp = std::make_unique<Ucp>();
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.estimated_num_eps = peers;
  st = ucp_init(&params, config, &ucp->context);
  ucp_config_release(config);
  if (st != UCS_OK) return ucs_error("creating the UCP context", st);

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_EVENTS;
  // Serialized, not single: a communicator's non-blocking calls drive the worker from a thread
  // of their own (one thread at a time, never two at once).
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  wp.events = UCP_WAKEUP_TAG_SEND | UCP_WAKEUP_TAG_RECV | UCP_WAKEUP_RX;
  st = ucp_worker_create(ucp->context, &wp, &ucp->worker);
  if (st != UCS_OK) return ucs_error("creating the UCP worker", st);
  if (ucp_worker_get_efd(ucp->worker, &ucp->event_fd) != UCS_OK) {
    HOOP_LOG(kDebug, "ucx: the worker gives no event fd; waits sleep in short slices");
    ucp->event_fd = -1;
  }
  return ucp;
}

Result<std::string> worker_address(ucp_worker_h worker) {
  ucp_address_t* address = nullptr;
  std::size_t length = 0;
  const ucs_status_t st = ucp_worker_get_address(worker, &address, &length);
  if (st != UCS_OK) return ucs_error("getting the worker's address", st);
  std::string bytes(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(worker, address);
  return bytes;
}

/// Waits for every peer's record; the error names the ranks whose records did not come.
Status wait_for_peers(Store& store, const UcxOptions& o, std::span<const int> peers, int rank,
                      Deadline deadline) {
  std::vector<std::string> keys;
  for (int p : peers) keys.push_back(key(o, p));
  const Status s = store.wait(keys, remaining(deadline));
  if (s.ok() || s.code() != StatusCode::kTimeout) {
    return s.with_context(fmt::format("ucx: rank {} waiting for its peers' addresses", rank));
  }
  std::string missing;
  for (int p : peers) {
    if (!store.get(key(o, p)).ok()) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", p);
  }
  return timeout_error(
      fmt::format("ucx: rank {}: rank(s) {} did not publish their addresses "
                  "within {} ms",
                  rank, missing.empty() ? "?" : missing, o.connect_timeout.count()));
}

}  // namespace

std::string ucs_text(ucs_status_t status) { return ucs_status_string(status); }

Ucp::~Ucp() {
  if (worker != nullptr) ucp_worker_destroy(worker);
  if (context != nullptr) ucp_cleanup(context);
}

std::string ucx_version() { return ucp_get_version_string(); }

bool ucx_usable(std::string* why) {
  auto ucp = open_worker(1);
  if (!ucp.ok() && why != nullptr) *why = ucp.status().message();
  return ucp.ok();
}

Result<UcxOptions> ucx_options_from_env() {
  UcxOptions o;
  HOOP_ASSIGN_OR_RETURN(const std::int64_t spin, config::get_int("HOOP_SPIN_US"));
  o.spin = std::chrono::microseconds(spin);
  HOOP_ASSIGN_OR_RETURN(o.connect_timeout, config::get_milliseconds("HOOP_START_TIMEOUT"));
  return o;
}

Result<std::unique_ptr<Transport>> connect(Store& store, int rank, int size,
                                           std::span<const int> peers, const std::string& job_id,
                                           const UcxOptions& options) {
  HOOP_RETURN_IF_ERROR(check_arguments(rank, size, peers, job_id, options));
  // A job that uses UCX gets UCX's crash reports back (ucx_signals.h); a probe does not.
  restore_error_handlers();
  const Deadline deadline = Clock::now() + options.connect_timeout;
  HOOP_ASSIGN_OR_RETURN(std::unique_ptr<Ucp> ucp, open_worker(peers.size()));
  Record own;
  own.job_id = job_id;
  HOOP_ASSIGN_OR_RETURN(own.host_id, local_host_id());
  own.pid = static_cast<int>(::getpid());
  HOOP_ASSIGN_OR_RETURN(own.address, worker_address(ucp->worker));
  HOOP_RETURN_IF_ERROR(store.set(key(options, rank), encode(own)));
  HOOP_RETURN_IF_ERROR(wait_for_peers(store, options, peers, rank, deadline));

  std::vector<std::unique_ptr<Peer>> connected;
  // Endpoints live in the worker: on a failure below, they go before it (Ucp's destructor).
  struct CloseOnFailure {
    std::vector<std::unique_ptr<Peer>>& peers;
    bool armed = true;
    ~CloseOnFailure() {
      if (!armed) return;
      for (auto& p : peers) {
        if (p->ep == nullptr) continue;
        ucp_request_param_t param{};
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags = UCP_EP_CLOSE_FLAG_FORCE;
        void* req = ucp_ep_close_nbx(p->ep, &param);
        if (UCS_PTR_IS_PTR(req)) ucp_request_free(req);
      }
    }
  } close_on_failure{connected};
  for (int p : peers) {
    HOOP_ASSIGN_OR_RETURN(const std::string value, store.get(key(options, p)));
    HOOP_ASSIGN_OR_RETURN(const Record record, decode(value, p));
    if (record.job_id != job_id) {
      return auth_failed(fmt::format("ucx: rank {} published an address for job '{}', not '{}'", p,
                                     record.job_id, job_id));
    }
    auto peer = std::make_unique<Peer>();
    peer->rank = p;
    peer->pid = record.pid;
    const bool same_host = record.host_id == own.host_id;
    if (same_host && record.pid != own.pid) peer->pidfd = open_pidfd(peer->pid);
    // UCX 1.13's shared-memory transports do not support peer error handling, and an endpoint
    // that asks for it skips them. On one host the peer's process is watched through its pidfd
    // instead, so only endpoints across hosts ask UCX to report peer failures. Both ends of a
    // pair see the same host ids, so they choose alike.
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.address = reinterpret_cast<const ucp_address_t*>(record.address.data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    if (!same_host) {
      ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = on_endpoint_error;
      ep.err_handler.arg = peer.get();
    }
    const ucs_status_t st = ucp_ep_create(ucp->worker, &ep, &peer->ep);
    if (st != UCS_OK) {
      return ucs_error(fmt::format("rank {} creating an endpoint to rank {}", rank, p), st);
    }
    connected.push_back(std::move(peer));
  }
  // UCX's shared-memory transports attach to the peer's worker when the endpoint is created:
  // no rank may go on (and possibly destroy its worker) until every peer has its endpoints.
  HOOP_RETURN_IF_ERROR(store.set(fmt::format("{}/connected/{}", options.key_prefix, rank), "1"));
  std::vector<std::string> connected_keys;
  for (int p : peers)
    connected_keys.push_back(fmt::format("{}/connected/{}", options.key_prefix, p));
  HOOP_RETURN_IF_ERROR(
      store.wait(connected_keys, remaining(deadline))
          .with_context(
              fmt::format("ucx: rank {} waiting for its peers to create their endpoints", rank)));
  close_on_failure.armed = false;
  return std::unique_ptr<Transport>(
      std::make_unique<UcxTransport>(rank, size, options, std::move(ucp), std::move(connected)));
}

}  // namespace hoop::ucx
