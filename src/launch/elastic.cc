#include "launch/elastic.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <map>
#include <memory>

#include "hoop/rendezvous.h"
#include "launch/exit_codes.h"
#include "launch/hosts.h"
#include "launch/output.h"
#include "launch/process.h"

namespace hoop::launch {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::seconds kDiscoveryInterval{1};
// A script that has not answered by then is killed, and the round goes on with the hosts it
// last reported.
constexpr std::chrono::seconds kDiscoveryTimeout{10};
constexpr std::size_t kMaxScriptOutput = std::size_t{1} << 20;
// The newest rounds whose failure reports hooprun reads (check_failed_rounds): a worker still
// waiting in an older one has long been replaced.
constexpr int kReportedRounds = 3;

// Runs the discovery script (in its own process group, killed at the deadline) and returns
// what it printed on stdout.
Result<std::string> run_script(const std::string& path, const sigset_t& mask) {
  Fd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null.valid()) return errno_error("open /dev/null", errno);
  SpawnRequest request{path, {path}, current_environment(), dev_null.get(), mask};
  HOOP_ASSIGN_OR_RETURN(ChildProcess child, spawn_process(request));
  std::array<Fd*, 2> fds{&child.stdout_fd, &child.stderr_fd};
  std::array<std::string, 2> text;
  const auto deadline = Clock::now() + kDiscoveryTimeout;
  bool timed_out = false;
  while (fds[0]->valid() || fds[1]->valid()) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      ::kill(-child.pid, SIGKILL);
      break;
    }
    std::array<pollfd, 2> polled{};
    for (int i = 0; i < 2; ++i) polled[i] = {fds[i]->valid() ? fds[i]->get() : -1, POLLIN, 0};
    if (::poll(polled.data(), polled.size(), static_cast<int>(left.count())) < 0 && errno != EINTR)
      break;
    for (int i = 0; i < 2; ++i) {
      if (polled[i].revents == 0) continue;
      std::array<char, 4096> buffer;
      const ssize_t n = ::read(fds[i]->get(), buffer.data(), buffer.size());
      if (n > 0 && text[i].size() < kMaxScriptOutput) text[i].append(buffer.data(), n);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) fds[i]->reset();
    }
  }
  int raw = 0;
  while (::waitpid(child.pid, &raw, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return timeout_error(fmt::format("the host discovery script '{}' did not finish within {} s",
                                     path, kDiscoveryTimeout.count()));
  const ExitStatus status{WIFSIGNALED(raw), WIFSIGNALED(raw) ? WTERMSIG(raw) : WEXITSTATUS(raw)};
  if (!status.success()) {
    TailLines tail(1);
    tail.feed(text[1]);
    const std::vector<std::string> last = tail.lines();
    const std::string why = last.empty() ? "" : last.back();
    return io_error(fmt::format("the host discovery script '{}' {}{}", path, status.describe(),
                                why.empty() ? "" : ": " + why));
  }
  return text[0];
}

// One process the job started, and where it is in the newest round.
struct Worker {
  int serial = 0;  // in start order: the output's "[serial]" label
  std::string id;  // HOOP_ELASTIC_ID: "serial@host:slot"
  std::string host;
  int slot = 0;
  int index = -1;        // the supervisor's
  int rank = -1;         // in the newest round
  int first_round = -1;  // the round it was started for
  std::map<int, int> ranks;  // round -> its rank there, for the rounds it was part of
  bool running = true;
  bool removed = false;  // stopped by hooprun: its end is no failure
};

class ElasticJob final : public JobDriver {
 public:
  ElasticJob(const ElasticOptions& options, int initial_np, const JobSpec& spec,
             const CommandFactory& command_for_host, const sigset_t& mask,
             std::unique_ptr<Store> store, std::string script)
      : options_(options),
        initial_np_(initial_np),
        spec_(spec),
        command_for_host_(command_for_host),
        mask_(mask),
        store_(std::move(store)),
        script_(std::move(script)) {}

  void start(JobControl& job) override {
    wait_since_ = Clock::now();
    waiting_ = true;
    discover(job);
    reconcile(job);
  }

  void on_exit(JobControl& job, int index, const ExitStatus& status) override {
    auto it = std::find_if(workers_.begin(), workers_.end(),
                           [&](const Worker& w) { return w.index == index; });
    if (it == workers_.end()) return;
    it->running = false;
    if (it->removed) return;
    if (status.success()) {
      // The training function returned: the job is ending, and no new round begins.
      finishing_ = true;
      stop_orphaned_round(job, *it);
      return;
    }
    if (finishing_) {
      job.end_job(status.shell_code(), index);
      return;
    }
    last_failure_ = index;
    blacklist_.emplace(it->host, false);
    say(fmt::format("elastic: worker {} on {} (rank {} of round {}) {}; host {} is blacklisted",
                    it->serial, it->host, it->rank, round_, status.describe(), it->host));
    for (Worker& other : workers_) {
      if (other.running && other.host == it->host) remove(job, other);
    }
    changed_ = true;
    reconcile(job);
  }

  std::optional<Clock::time_point> next_tick() const override {
    if (ended_ || finishing_) return std::nullopt;
    return next_discovery_;
  }

  void tick(JobControl& job) override {
    check_failed_rounds(job);
    discover(job);
    reconcile(job);
  }

  bool waiting() const override { return waiting_ && !ended_ && !finishing_; }

 private:
  void discover(JobControl& job) {
    next_discovery_ = Clock::now() + kDiscoveryInterval;
    Result<std::string> text = run_script(script_, mask_);
    Result<std::vector<HostSlots>> hosts =
        text.ok() ? parse_host_lines(*text, script_, options_.default_slots)
                  : Result<std::vector<HostSlots>>(text.status());
    if (!hosts.ok()) {
      // A failing script leaves the job as it is; the message says why once per change.
      if (hosts.status().message() != last_discovery_error_) say(hosts.status().message());
      last_discovery_error_ = hosts.status().message();
      return;
    }
    last_discovery_error_.clear();
    for (auto it = blacklist_.begin(); it != blacklist_.end();) {
      const bool listed = std::any_of(hosts->begin(), hosts->end(),
                                      [&](const HostSlots& h) { return h.name == it->first; });
      if (!listed) {
        it->second = true;  // gone: listed again, it counts as a new machine
        ++it;
      } else if (it->second) {
        if (job.verbose()) say(fmt::format("elastic: host {} is listed again", it->first));
        it = blacklist_.erase(it);
      } else {
        ++it;
      }
    }
    hosts_ = std::move(*hosts);
  }

  // Workers report a round that failed under them (elastic::run) before they reset. A worker
  // that ends makes on_exit start the next round; when none ends (a worker stopped or hung, a
  // link cut, a set-up that could not connect), the reports do: once every worker of the newest
  // round reported, the same workers get a new one; a worker of a failed round that neither
  // reported it nor joined a later round within the reporters' HOOP_TIMEOUT_SECONDS of the first
  // report is taken for hung, stopped and its host blacklisted, as a failed worker's is. The
  // survivors, waiting to join, then move on to the round without it: 2 x HOOP_TIMEOUT_SECONDS
  // after it stopped answering at most, not the elastic timeout.
  void check_failed_rounds(JobControl& job) {
    if (round_ < 0 || ended_ || finishing_ || changed_) return;
    const auto now = Clock::now();
    for (int failed = std::max(0, round_ - kReportedRounds + 1); failed <= round_; ++failed) {
      std::vector<Worker*> members;
      for (Worker& w : workers_)
        if (w.running && !w.removed && w.ranks.contains(failed)) members.push_back(&w);
      if (members.empty()) continue;
      int size = 0;
      for (const Worker& w : workers_)
        if (w.ranks.contains(failed)) size = std::max(size, w.ranks.at(failed) + 1);
      Result<FailedElasticRound> reports = failed_elastic_round(*store_, failed, size);
      if (!reports.ok() || reports->ranks.empty()) continue;
      const auto first = failed_seen_.try_emplace(failed, now).first->second;
      std::vector<Worker*> silent;
      for (Worker* w : members) {
        const bool reported = std::binary_search(reports->ranks.begin(), reports->ranks.end(),
                                                 w->ranks.at(failed));
        if (!reported && !joined_after(*w, failed)) silent.push_back(w);
      }
      if (silent.empty()) {
        if (failed < round_) continue;  // the next round is under way
        say(fmt::format("elastic: round {} failed on every worker ({}); starting the next with "
                        "the same workers",
                        failed, reports->cause));
        changed_ = true;
        return;
      }
      if (now < first + reports->timeout) continue;
      for (Worker* w : silent) {
        say(fmt::format("elastic: worker {} on {} (rank {} of round {}) has not answered since "
                        "the round failed (first report: {}); stopping it; host {} is blacklisted",
                        w->serial, w->host, w->ranks.at(failed), failed, reports->cause,
                        w->host));
        last_failure_ = w->index;
        blacklist_.emplace(w->host, false);
        for (Worker& other : workers_)
          if (other.running && !other.removed && other.host == w->host) remove(job, other);
      }
      changed_ = true;
      return;
    }
  }

  // Whether `w` joined a round after `round` (the newest): it is alive and has moved on.
  bool joined_after(const Worker& w, int round) const {
    if (round_ <= round || !w.ranks.contains(round_)) return false;
    Result<bool> joined = elastic_rank_joined(*store_, round_, w.ranks.at(round_));
    return joined.ok() && *joined;
  }

  int usable_slots(const std::string& host) const {
    if (blacklist_.contains(host)) return 0;
    for (const HostSlots& h : hosts_) {
      if (h.name == host) return h.slots;
    }
    return 0;
  }

  bool occupied(const std::string& host, int slot) const {
    return std::any_of(workers_.begin(), workers_.end(), [&](const Worker& w) {
      return w.running && w.host == host && w.slot == slot;
    });
  }

  // A round published as the job ended (a host came just then) has workers that wait for
  // ranks that finished without joining it: nothing will complete it, so they are stopped.
  void stop_orphaned_round(JobControl& job, const Worker& finished) {
    if (finished.rank < 0) return;
    Result<bool> joined = elastic_rank_joined(*store_, round_, finished.rank);
    if (!joined.ok() || *joined) return;
    for (Worker& w : workers_) {
      if (w.running && !w.removed && w.first_round == round_) {
        say(fmt::format("elastic: the job ended before round {} began; stopping worker {}", round_,
                        w.serial));
        remove(job, w);
      }
    }
  }

  void remove(JobControl& job, Worker& w) {
    w.removed = true;
    job.stop_worker(w.index);
  }

  void fail(JobControl& job, const std::string& message) {
    say(message);
    ended_ = true;
    job.end_job(kExitFailure, last_failure_);
  }

  // Brings the workers in line with the hosts: stops those on hosts that are gone, and
  // publishes a new round with the free slots filled when anything changed.
  void reconcile(JobControl& job) {
    if (ended_ || finishing_) return;
    for (Worker& w : workers_) {
      if (w.running && !w.removed && w.slot >= usable_slots(w.host)) {
        say(fmt::format("elastic: host {} is gone; stopping worker {}", w.host, w.serial));
        remove(job, w);
        changed_ = true;
      }
    }
    std::vector<Worker*> members;
    for (Worker& w : workers_) {
      if (w.running && !w.removed) members.push_back(&w);
    }
    const int cap = options_.max_np.value_or(INT32_MAX);
    std::vector<Worker> fresh;
    for (const HostSlots& h : hosts_) {
      for (int slot = 0; slot < usable_slots(h.name); ++slot) {
        if (static_cast<int>(members.size() + fresh.size()) >= cap) break;
        if (occupied(h.name, slot)) continue;
        Worker w;
        w.serial = next_serial_ + static_cast<int>(fresh.size());
        w.host = h.name;
        w.slot = slot;
        w.id = fmt::format("{}@{}:{}", w.serial, h.name, slot);
        fresh.push_back(std::move(w));
      }
    }
    const int total = static_cast<int>(members.size() + fresh.size());
    if (!changed_ && fresh.empty()) return;
    const int needed = round_ < 0 ? initial_np_ : options_.min_np;
    if (total < needed) {
      if (!waiting_) wait_since_ = Clock::now();
      waiting_ = true;
      const bool expired = Clock::now() >= wait_since_ + timeout();
      if (expired && (round_ >= 0 || total < options_.min_np)) {
        fail(job, fmt::format("elastic: {} worker slot{} available, fewer than the {} needed, "
                              "after waiting {} s (--elastic-timeout)",
                              total, total == 1 ? "" : "s", needed, options_.timeout_s));
        return;
      }
      if (!expired) return;  // the first round starts with --min-np once the wait is over
    }
    publish(job, members, std::move(fresh));
  }

  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(static_cast<std::int64_t>(options_.timeout_s * 1000.0));
  }

  void publish(JobControl& job, std::vector<Worker*> members, std::vector<Worker> fresh) {
    if (round_ >= 0 && options_.reset_limit && resets_ >= *options_.reset_limit) {
      fail(job, fmt::format("elastic: the job needs a new round, but it was reset {} time{} "
                            "already (--reset-limit)",
                            resets_, resets_ == 1 ? "" : "s"));
      return;
    }
    std::vector<std::unique_ptr<Worker>> started;
    for (Worker& w : fresh) {
      if (!commands_.contains(w.host)) {
        Result<RankCommand> command = command_for_host_(w.host);
        if (command.ok() && command->access.kind == HostAccess::Kind::kSsh &&
            spec_.env.rendezvous_addr.starts_with("127.")) {
          command = invalid_argument(fmt::format(
              "host {} is reached over ssh, but the rendezvous store listens on {}: give "
              "--rendezvous-addr or --network-interface",
              w.host, spec_.env.rendezvous_addr));
        }
        if (!command.ok()) {
          fail(job, command.status().message());
          return;
        }
        commands_.emplace(w.host, std::move(*command));
      }
      members.push_back(&w);
    }
    // Hosts in the order of their lowest rank in the last round, new hosts last; on a host,
    // its old workers first: rank 0 holds committed state whenever any worker does.
    auto key = [](const Worker* w) { return w->rank < 0 ? INT32_MAX : w->rank; };
    std::vector<std::string> host_order;
    std::map<std::string, int> host_key;
    for (const Worker* w : members) {
      auto [it, added] = host_key.emplace(w->host, key(w));
      if (added) host_order.push_back(w->host);
      it->second = std::min(it->second, key(w));
    }
    std::stable_sort(
        host_order.begin(), host_order.end(),
        [&](const std::string& a, const std::string& b) { return host_key[a] < host_key[b]; });
    std::vector<std::pair<std::string, ElasticPlace>> places;
    std::vector<Worker*> ordered;
    for (std::size_t h = 0; h < host_order.size(); ++h) {
      std::vector<Worker*> on_host;
      for (Worker* w : members) {
        if (w->host == host_order[h]) on_host.push_back(w);
      }
      std::stable_sort(on_host.begin(), on_host.end(), [&](const Worker* a, const Worker* b) {
        return std::pair(key(a), a->slot) < std::pair(key(b), b->slot);
      });
      for (std::size_t l = 0; l < on_host.size(); ++l) {
        ElasticPlace p;
        p.rank = static_cast<int>(ordered.size());
        p.size = static_cast<int>(members.size());
        p.local_rank = static_cast<int>(l);
        p.local_size = static_cast<int>(on_host.size());
        p.cross_rank = static_cast<int>(h);
        p.cross_size = static_cast<int>(host_order.size());
        places.emplace_back(on_host[l]->id, p);
        ordered.push_back(on_host[l]);
      }
    }
    const int round = round_ + 1;
    if (Status s = publish_elastic_round(*store_, round, places); !s.ok()) {
      fail(job, fmt::format("elastic: cannot publish round {}: {}", round, s.message()));
      return;
    }
    if (round_ >= 0) ++resets_;
    round_ = round;
    for (std::size_t r = 0; r < ordered.size(); ++r) {
      ordered[r]->rank = static_cast<int>(r);
      ordered[r]->ranks[round] = static_cast<int>(r);
    }
    say(fmt::format("elastic: round {}: {} worker{} on {} host{}{}", round, ordered.size(),
                    ordered.size() == 1 ? "" : "s", host_order.size(),
                    host_order.size() == 1 ? "" : "s",
                    fresh.empty() ? "" : fmt::format(", {} new", fresh.size())));
    waiting_ = false;
    changed_ = false;
    for (Worker& w : fresh) {
      next_serial_ = std::max(next_serial_, w.serial + 1);
      w.first_round = round;
      WorkerSpec spec;
      spec.command = &commands_.at(w.host);
      spec.env = elastic_environment(spec_.inherited_env, spec_.env, w.id, options_.timeout_s);
      spec.label = std::to_string(w.serial);
      spec.name = fmt::format("worker {}", w.serial);
      spec.name_host = true;
      spec.host = w.host;
      spec.detail = fmt::format(" HOOP_ELASTIC_ID={} (rank {} of round {})", w.id, w.rank, round);
      Result<int> index = job.start_worker(std::move(spec));
      if (!index.ok()) {
        // The round waits for it in vain: blacklist its host and publish the next one.
        say(fmt::format("elastic: cannot start a worker on {}: {}", w.host,
                        index.status().message()));
        blacklist_.emplace(w.host, false);
        changed_ = true;
        continue;
      }
      w.index = *index;
      workers_.push_back(std::move(w));
    }
  }

  const ElasticOptions& options_;
  const int initial_np_;
  const JobSpec& spec_;
  const CommandFactory& command_for_host_;
  const sigset_t& mask_;
  std::unique_ptr<Store> store_;
  const std::string script_;
  std::vector<HostSlots> hosts_;
  std::map<std::string, bool> blacklist_;        // host -> no longer listed since it failed
  std::map<std::string, RankCommand> commands_;  // stable addresses for WorkerSpec
  std::vector<Worker> workers_;
  int next_serial_ = 0;
  int round_ = -1;
  int resets_ = 0;
  bool changed_ = true;
  bool waiting_ = false;
  bool finishing_ = false;
  bool ended_ = false;
  std::optional<int> last_failure_;
  std::map<int, Clock::time_point> failed_seen_;  // round -> when its first report was seen
  std::string last_discovery_error_;
  Clock::time_point wait_since_;
  Clock::time_point next_discovery_;
};

}  // namespace

int run_elastic_job(const ElasticOptions& options, int initial_np, const JobSpec& spec,
                    const CommandFactory& command_for_host, SignalChannel& signals) {
  const char* path_env = std::getenv("PATH");
  Result<std::string> script =
      find_executable(options.discovery_script, path_env ? path_env : "/usr/bin:/bin");
  if (!script.ok()) {
    say(fmt::format("--host-discovery-script: {}", script.status().message()));
    return script.status().code() == StatusCode::kNotFound ? kExitNotFound : kExitCannotExecute;
  }
  const auto timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(spec.env.start_timeout_s * 1000.0));
  Result<std::unique_ptr<Store>> store =
      Store::connect(spec.env.rendezvous_addr, spec.env.rendezvous_port,
                     StoreOptions{spec.env.secret, spec.env.job_id, timeout});
  if (!store.ok()) {
    say(fmt::format("elastic: cannot reach the rendezvous store: {}", store.status().message()));
    return kExitFailure;
  }
  if (spec.verbose) {
    say(fmt::format("elastic job {}: {} to {} workers, hosts from {}, rendezvous store on {}:{}",
                    spec.env.job_id, options.min_np,
                    options.max_np ? std::to_string(*options.max_np) : "any number of", *script,
                    spec.env.rendezvous_addr, spec.env.rendezvous_port));
  }
  ElasticJob driver(options, initial_np, spec, command_for_host, signals.original_mask(),
                    std::move(*store), std::move(*script));
  return supervise(spec, driver, signals);
}

}  // namespace hoop::launch
