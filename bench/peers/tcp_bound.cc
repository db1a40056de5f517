// tcp_bound: what loopback TCP itself can carry when both directions are busy at once, the
// ceiling for a 2-rank allreduce's busbw on this machine.
//
// Why that is the bound. With two ranks, each must end up with the other's contribution to
// every element. Whatever the algorithm, rank 0 must receive data worth the whole buffer
// (S bytes: the peer's half to reduce plus the reduced other half for a ring, or all of it for
// a direct exchange) and must send as much, and both ranks do so at the same time over the one
// connection between them. So time >= S / B, where B is the per-direction throughput with both
// directions loaded; algbw = S / time <= B, and for n = 2 busbw = algbw x 2(n-1)/n = algbw.
// Reduction, copies and synchronisation only add time, so a 2-rank allreduce's busbw on
// loopback should approach B but never pass it. The unidirectional figure is printed too: the
// gap between the two is the cost of sharing the CPUs between the two directions.
//
// Two processes (a fork) each drive one socket from a single busy-polling thread, as a
// one-thread-per-rank collective does, sending from and receiving into buffers of the full
// transfer size so that memory traffic matches a real allreduce of that size. The sizes sweep
// like the collective benchmarks' (-b/-e/-f). The argument above is about bandwidth, so the
// bound is firm for large messages; for small ones the time is a latency reference (how the
// idle loop waits matters as much as the bytes there, and MPI's spinning can come close or pass
// it on an idle machine).
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench/common/cli_parse.h"
#include "bench/common/bench_table.h"
#include "core/fd.h"
#include "hoop/version.h"

namespace hoop::bench {
namespace {

constexpr std::chrono::seconds kPeerSilence{10};  // a silent peer for this long has died

struct Settings {
  BenchOptions sizes;  // -b -e -f, as in the collective benchmarks
  std::size_t sockbuf = 4 << 20;
  std::size_t io_size = 1 << 20;  // largest single send()/recv()
  int iters = 5;
  int warmup = 1;
  std::string json_path;
};

struct SizeResult {
  std::size_t bytes;
  double bidir_us;
  double unidir_us;
};

Status set_buffers(int fd, std::size_t bytes) {
  const int value = static_cast<int>(bytes);
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, sizeof(value)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &value, sizeof(value)) != 0)
    return errno_error("setsockopt(SO_SNDBUF/SO_RCVBUF)", errno);
  return Status::success();
}

int socket_option(int fd, int name) {
  int value = 0;
  socklen_t length = sizeof(value);
  getsockopt(fd, SOL_SOCKET, name, &value, &length);
  return value;
}

// A listening socket on 127.0.0.1 with an ephemeral port; buffers set before listen() are
// inherited by the accepted connection, so the window can open fully from the first byte.
Result<std::pair<Fd, std::uint16_t>> listen_loopback(std::size_t sockbuf) {
  Fd fd(socket(AF_INET, SOCK_STREAM, 0));
  if (fd.get() < 0) return errno_error("socket", errno);
  HOOP_RETURN_IF_ERROR(set_buffers(fd.get(), sockbuf));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), length) != 0)
    return errno_error("bind 127.0.0.1", errno);
  if (listen(fd.get(), 1) != 0) return errno_error("listen", errno);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &length) != 0)
    return errno_error("getsockname", errno);
  return std::pair<Fd, std::uint16_t>(std::move(fd), ntohs(addr.sin_port));
}

Result<Fd> connect_loopback(std::uint16_t port, std::size_t sockbuf) {
  Fd fd(socket(AF_INET, SOCK_STREAM, 0));
  if (fd.get() < 0) return errno_error("socket", errno);
  HOOP_RETURN_IF_ERROR(set_buffers(fd.get(), sockbuf));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    return errno_error("connect 127.0.0.1", errno);
  return fd;
}

// Sends `send_bytes` from `out` while receiving `recv_bytes` into `in`, whichever the socket
// allows, until both are done. It spins on the non-blocking socket instead of sleeping in
// poll(): a wake-up costs tens of microseconds on a virtual machine, and Open MPI's TCP
// transport spins too (yielding when idle), so a sleeping probe would not bound it.
Status exchange(int fd, const char* out, std::size_t send_bytes, char* in, std::size_t recv_bytes,
                std::size_t io_size) {
  std::size_t sent = 0;
  std::size_t received = 0;
  auto last_progress = std::chrono::steady_clock::now();
  for (std::uint64_t spin = 1; sent < send_bytes || received < recv_bytes; ++spin) {
    bool progress = false;
    // The sockets' ::recv and ::send: inside namespace hoop, hoop::recv and hoop::send
    // (point-to-point, hoop/communicator.h) would hide them.
    if (received < recv_bytes) {
      const ssize_t n = ::recv(fd, in + received, std::min(io_size, recv_bytes - received), 0);
      if (n == 0) return peer_lost("the peer process closed the connection");
      if (n < 0 && errno != EAGAIN && errno != EINTR) return errno_error("recv", errno);
      if (n > 0) received += static_cast<std::size_t>(n);
      progress = progress || n > 0;
    }
    if (sent < send_bytes) {
      const ssize_t n = ::send(fd, out + sent, std::min(io_size, send_bytes - sent), MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EINTR) return errno_error("send", errno);
      if (n > 0) sent += static_cast<std::size_t>(n);
      progress = progress || n > 0;
    }
    if (progress) {
      spin = 0;
      continue;
    }
    // Give the core away while idle: on a shared machine the peer (or another job) may be
    // waiting for it, and holding it until the time slice ends costs milliseconds.
    sched_yield();
    if (spin % 1024 == 0) {  // reading the clock on every spin would slow the loop
      const auto now = std::chrono::steady_clock::now();
      if (spin == 1024) last_progress = now;
      if (now - last_progress > kPeerSilence)
        return timeout_error("the peer process sent nothing for 10 s");
    }
  }
  return Status::success();
}

// One side of the measurement. A one-byte token from the parent lines both sides up before
// the warm-up; after that the iterations run back to back, as a benchmark's allreduces do.
// Bidirectional: both send `bytes` and receive `bytes`; neither can finish an iteration before
// the peer's data of that iteration has arrived, the same dependency a 2-rank allreduce has.
// Unidirectional: the parent sends, the child receives and answers with one byte, so the
// parent's time counts the delivery and not just the hand-over to the kernel.
struct Side {
  int fd;
  bool parent;
  const Settings& settings;
  std::vector<char>& out;
  std::vector<char>& in;

  Status token() {
    char byte = 't';
    return parent ? exchange(fd, &byte, 1, nullptr, 0, 1) : exchange(fd, nullptr, 0, &byte, 1, 1);
  }

  Status iteration(std::size_t bytes, bool bidirectional) {
    const std::size_t send_bytes = bidirectional || parent ? bytes : 0;
    const std::size_t recv_bytes = bidirectional || !parent ? bytes : 0;
    HOOP_RETURN_IF_ERROR(
        exchange(fd, out.data(), send_bytes, in.data(), recv_bytes, settings.io_size));
    if (bidirectional) return Status::success();
    char done = 'd';
    return parent ? exchange(fd, nullptr, 0, &done, 1, 1) : exchange(fd, &done, 1, nullptr, 0, 1);
  }

  // Mean time per iteration in microseconds (the parent's clock).
  Result<double> run(std::size_t bytes, bool bidirectional) {
    HOOP_RETURN_IF_ERROR(token());
    for (int i = 0; i < settings.warmup; ++i) HOOP_RETURN_IF_ERROR(iteration(bytes, bidirectional));
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < settings.iters; ++i) HOOP_RETURN_IF_ERROR(iteration(bytes, bidirectional));
    const std::chrono::duration<double, std::micro> elapsed =
        std::chrono::steady_clock::now() - start;
    return elapsed.count() / settings.iters;
  }
};

// Non-blocking for the spinning exchange(), and without Nagle's delay, which would hold back the
// small messages and the one-byte tokens (MPI's and Gloo's TCP transports disable it too).
Status prepare_socket(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return errno_error("fcntl", errno);
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
    return errno_error("setsockopt(TCP_NODELAY)", errno);
  return Status::success();
}

int child_main(std::uint16_t port, const Settings& settings) {
  const auto fail = [](const Status& s) {
    fmt::print(stderr, "tcp_bound (child): {}\n", s.to_string());
    return 1;
  };
  Result<Fd> fd = connect_loopback(port, settings.sockbuf);
  if (!fd.ok()) return fail(fd.status());
  if (const Status s = prepare_socket(fd->get()); !s.ok()) return fail(s);
  std::vector<char> out(settings.sizes.max_bytes, 'c');
  std::vector<char> in(settings.sizes.max_bytes, 0);
  Side side{fd->get(), false, settings, out, in};
  for (const std::size_t bytes : message_sizes(settings.sizes, 1)) {
    for (const bool bidirectional : {true, false}) {
      if (const Result<double> r = side.run(bytes, bidirectional); !r.ok()) return fail(r.status());
    }
  }
  return 0;
}

double gbps(std::size_t bytes, double us) { return static_cast<double>(bytes) / (us * 1e3); }

Status write_json(const Settings& settings, int sndbuf, int rcvbuf,
                  const std::vector<SizeResult>& results) {
  nlohmann::json rows = nlohmann::json::array();
  for (const SizeResult& r : results) {
    rows.push_back(
        {{"size", r.bytes},
         {"bidirectional",
          {{"time_us", r.bidir_us}, {"gbps_per_direction", gbps(r.bytes, r.bidir_us)}}},
         {"unidirectional",
          {{"time_us", r.unidir_us}, {"gbps_per_direction", gbps(r.bytes, r.unidir_us)}}}});
  }
  const nlohmann::json report{{"program", "tcp_bound"},
                              {"nranks", 2},
                              {"settings",
                               {{"minbytes", settings.sizes.min_bytes},
                                {"maxbytes", settings.sizes.max_bytes},
                                {"stepfactor", settings.sizes.step_factor},
                                {"iters", settings.iters},
                                {"warmup_iters", settings.warmup},
                                {"sockbuf_requested", settings.sockbuf},
                                {"io_size", settings.io_size}}},
                              {"so_sndbuf", sndbuf},
                              {"so_rcvbuf", rcvbuf},
                              {"rows", rows}};
  std::ofstream file(settings.json_path);
  file << report.dump(2) << '\n';
  file.close();
  if (!file) return io_error(fmt::format("cannot write {}", settings.json_path));
  return Status::success();
}

Status parent_main(Fd listener, const Settings& settings) {
  const int fd_raw = accept(listener.get(), nullptr, nullptr);
  if (fd_raw < 0) return errno_error("accept", errno);
  const Fd fd(fd_raw);
  HOOP_RETURN_IF_ERROR(prepare_socket(fd.get()));
  std::vector<char> out(settings.sizes.max_bytes, 'p');
  std::vector<char> in(settings.sizes.max_bytes, 0);
  Side side{fd.get(), true, settings, out, in};
  const int sndbuf = socket_option(fd.get(), SO_SNDBUF);
  const int rcvbuf = socket_option(fd.get(), SO_RCVBUF);

  fmt::print("# tcp_bound: bulk transfer between 2 processes over loopback TCP\n");
  fmt::print("# minBytes {} maxBytes {} step: {:g}(factor) warmup iters: {} iters: {}\n",
             settings.sizes.min_bytes, settings.sizes.max_bytes, settings.sizes.step_factor,
             settings.warmup, settings.iters);
  fmt::print(
      "# socket buffers {} requested (kernel reports SO_SNDBUF {}, SO_RCVBUF {}), "
      "one busy-polling thread per process, send()/recv() of at most {} bytes\n#\n",
      settings.sockbuf, sndbuf, rcvbuf, settings.io_size);
  fmt::print("# {:>10s}  {:^24s}  {:^24s}\n", "", "bidirectional", "unidirectional");
  fmt::print("# {:>10s}  {:>10s}  {:>12s}  {:>10s}  {:>12s}\n", "size", "time", "per direction",
             "time", "bandwidth");
  fmt::print("# {:>10s}  {:>10s}  {:>12s}  {:>10s}  {:>12s}\n", "(B)", "(us)", "(GB/s)", "(us)",
             "(GB/s)");
  std::vector<SizeResult> results;
  for (const std::size_t bytes : message_sizes(settings.sizes, 1)) {
    SizeResult r{bytes, 0, 0};
    HOOP_ASSIGN_OR_RETURN(r.bidir_us, side.run(bytes, true));
    HOOP_ASSIGN_OR_RETURN(r.unidir_us, side.run(bytes, false));
    fmt::print("  {:10d}  {:10.2f}  {:12.3f}  {:10.2f}  {:12.3f}\n", bytes, r.bidir_us,
               gbps(bytes, r.bidir_us), r.unidir_us, gbps(bytes, r.unidir_us));
    std::fflush(stdout);
    results.push_back(r);
  }
  fmt::print("# The bidirectional column bounds a 2-rank allreduce's busbw at each size.\n");
  if (settings.json_path.empty()) return Status::success();
  return write_json(settings, sndbuf, rcvbuf, results);
}

int run(int argc, char** argv) {
  CLI::App app{"Loopback TCP throughput with both directions busy: the 2-rank allreduce bound"};
  app.set_version_flag("--version", hoop::version_line("tcp_bound"));
  Settings settings;
  settings.sizes.min_bytes = 64 << 20;
  settings.sizes.max_bytes = 64 << 20;
  const auto bytes_option = [&app](const char* names, std::size_t& target, const char* help) {
    app.add_option_function<std::string>(
           names,
           [&target, names](const std::string& text) {
             const auto value = parse_bytes(text);
             if (!value || *value == 0)
               throw CLI::ValidationError(names, "expected bytes such as 8, 512K, 64M or 1G");
             target = *value;
           },
           help)
        ->default_str(std::to_string(target));
  };
  bytes_option("-b,--minbytes", settings.sizes.min_bytes, "Smallest transfer per direction");
  bytes_option("-e,--maxbytes", settings.sizes.max_bytes, "Largest transfer per direction");
  app.add_option("-f,--stepfactor", settings.sizes.step_factor,
                 "Multiply the size by this each step")
      ->capture_default_str();
  bytes_option("--sockbuf", settings.sockbuf, "SO_SNDBUF and SO_RCVBUF to request");
  bytes_option("--io-size", settings.io_size, "Largest single send() or recv()");
  app.add_option("-n,--iters", settings.iters, "Timed iterations per size")
      ->check(CLI::Range(1, 1 << 30).description("POSITIVE"))
      ->capture_default_str();
  app.add_option("-w,--warmup_iters", settings.warmup, "Untimed warm-up iterations per size")
      ->check(CLI::Range(0, 1 << 30).description("NONNEGATIVE"))
      ->capture_default_str();
  app.add_option("--json", settings.json_path, "Also write the results as JSON to this file");
  if (const auto code = hoop::bench::parse_command_line(app, argc, argv)) return *code;
  if (const Status s = validate(settings.sizes); !s.ok()) {
    fmt::print(stderr, "tcp_bound: {}\n", s.message());
    return 2;
  }

  Result<std::pair<Fd, std::uint16_t>> listener = listen_loopback(settings.sockbuf);
  if (!listener.ok()) {
    fmt::print(stderr, "tcp_bound: {}\n", listener.status().to_string());
    return 1;
  }
  const std::uint16_t port = listener->second;
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) {
    fmt::print(stderr, "tcp_bound: fork: {}\n", std::strerror(errno));
    return 1;
  }
  if (child == 0) {
    Fd closed = std::move(listener->first);  // the child only connects
    _exit(child_main(port, settings));
  }
  const Status status = parent_main(std::move(listener->first), settings);
  int child_status = 0;
  waitpid(child, &child_status, 0);
  if (!status.ok()) {
    fmt::print(stderr, "tcp_bound: {}\n", status.to_string());
    return 1;
  }
  if (!WIFEXITED(child_status) || WEXITSTATUS(child_status) != 0) {
    fmt::print(stderr, "tcp_bound: the child process failed (status {})\n", child_status);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace hoop::bench

int main(int argc, char** argv) { return hoop::bench::run(argc, argv); }
