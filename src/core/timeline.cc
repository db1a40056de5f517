#include "core/timeline.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <iterator>
#include <limits>

#include "core/config.h"
#include "core/log.h"

namespace hoop {
namespace {

using Args = std::vector<std::pair<std::string, std::string>>;

// What follows the last event. Every write overwrites it and puts it back after the new events.
constexpr std::string_view kClose = "\n]\n";
constexpr std::string_view kTruncated = "TIMELINE_TRUNCATED";

// Length of the well-formed UTF-8 sequence at s[i] (overlong forms and surrogates excluded, as
// strict JSON parsers do), or 0 when there is none.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return 1;
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return 0;
  }
  return len;
}

// Appends `s` as a JSON string. Bytes that are not UTF-8 become U+FFFD: one odd tensor name must
// not make the whole trace unreadable.
void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
      ++i;
    } else if (const std::size_t len = utf8_sequence_length(s, i); len > 0) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\\ufffd";
      ++i;
    }
  }
  out += '"';
}

struct Event {
  std::string_view name;
  std::string_view ph;
  std::string_view ts = "0";
  int pid = 0;
  int tid = 0;
  std::string_view scope = {};  // instant events only: "t" (its row) or "g" (the whole trace)
  const Args* args = nullptr;
};

// Appends ",\n" and `e` as one JSON object, fields in a fixed order.
void append_event(std::string& out, const Event& e) {
  out += ",\n{\"name\":";
  append_json_string(out, e.name);
  fmt::format_to(std::back_inserter(out), ",\"ph\":\"{}\",\"ts\":{},\"pid\":{},\"tid\":{}", e.ph,
                 e.ts, e.pid, e.tid);
  if (!e.scope.empty()) fmt::format_to(std::back_inserter(out), ",\"s\":\"{}\"", e.scope);
  out += ",\"args\":{";
  if (e.args != nullptr) {
    for (std::size_t i = 0; i < e.args->size(); ++i) {
      if (i > 0) out += ',';
      append_json_string(out, (*e.args)[i].first);
      out += ':';
      append_json_string(out, (*e.args)[i].second);
    }
  }
  out += "}}";
}

std::string format_timestamp(std::int64_t ns) {
  return fmt::format("{}.{:03}", ns / 1000, ns % 1000);
}

std::string truncation_marker(int pid, std::size_t max_bytes, std::string_view ts) {
  const Args args = {{"max_bytes", std::to_string(max_bytes)}};
  std::string out;
  append_event(out,
               {.name = kTruncated, .ph = "i", .ts = ts, .pid = pid, .scope = "g", .args = &args});
  return out;
}

// Writes all of `text` at `offset`; returns 0 or the errno of the failure.
int pwrite_all(int fd, std::string_view text, std::size_t offset) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n =
        ::pwrite(fd, text.data() + done, text.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

// The room the longest truncation marker needs: its size depends on its timestamp, and
// reserving the longest keeps the bound exact however long the job runs.
std::size_t marker_reserve(int pid, std::size_t max_bytes) {
  const std::string longest_ts = format_timestamp(std::numeric_limits<std::int64_t>::max());
  return truncation_marker(pid, max_bytes, longest_ts).size();
}

}  // namespace

std::unique_ptr<Timeline> Timeline::idle(int pid, std::size_t max_bytes) {
  return std::unique_ptr<Timeline>(new Timeline(pid, max_bytes));
}

Result<std::unique_ptr<Timeline>> Timeline::open(const std::string& path, int pid,
                                                 std::size_t max_bytes) {
  std::unique_ptr<Timeline> t = idle(pid, max_bytes);
  HOOP_RETURN_IF_ERROR(t->start(path));
  return t;
}

Timeline::Timeline(int pid, std::size_t max_bytes)
    : pid_(pid), max_bytes_(max_bytes), reserve_(marker_reserve(pid, max_bytes)) {}

Status Timeline::start(const std::string& path, bool mark_cycles) {
  const Args process_args = {{"name", fmt::format("rank {}", pid_)}};
  std::string header;
  append_event(header, {.name = "process_name", .ph = "M", .pid = pid_, .args = &process_args});
  header[0] = '[';  // the first event takes the place of the separator
  header += kClose;
  std::lock_guard lock(mu_);
  set_active(false);
  fd_ = Fd();
  if (max_bytes_ > 0 && header.size() + reserve_ > max_bytes_) {
    return invalid_argument(
        fmt::format("timeline {}: max_bytes {} is below the {} bytes that the first event and the "
                    "truncation marker need",
                    path, max_bytes_, header.size() + reserve_));
  }
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return errno_error(fmt::format("cannot create timeline {}", path), errno);
  if (const int err = pwrite_all(fd.get(), header, 0); err != 0)
    return errno_error(fmt::format("cannot write timeline {}", path), err);
  fd_ = std::move(fd);
  path_ = path;
  mark_cycles_ = mark_cycles;
  start_ = std::chrono::steady_clock::now();
  size_ = header.size();
  stopped_ = false;
  next_tid_ = 1;
  rows_.clear();  // a new file names its rows again
  set_active(true);
  return Status::success();
}

void Timeline::stop() {
  std::lock_guard lock(mu_);
  set_active(false);
  fd_ = Fd();
}

Timeline::~Timeline() {
  std::lock_guard lock(mu_);
  set_active(false);
}

namespace {

// Timelines of the process that write a file now: while there are none, a collective's trace
// costs one relaxed load.
std::atomic<int> active_timelines{0};

}  // namespace

void Timeline::set_active(bool active) {
  if (active_.exchange(active, std::memory_order_acq_rel) != active)
    active_timelines.fetch_add(active ? 1 : -1, std::memory_order_relaxed);
}

bool Timeline::any_active() { return active_timelines.load(std::memory_order_relaxed) > 0; }

void Timeline::begin(std::string_view tensor, std::string_view phase, const Args& args) {
  if (!active()) return;
  std::lock_guard lock(mu_);
  if (!active()) return;
  std::string events;
  Row& r = row(tensor, events);
  r.open_phases.emplace_back(phase);
  append_event(
      events,
      {.name = phase, .ph = "B", .ts = timestamp(), .pid = pid_, .tid = r.tid, .args = &args});
  append(events);
}

void Timeline::end(std::string_view tensor) {
  if (!active()) return;
  std::lock_guard lock(mu_);
  if (!active()) return;
  const auto it = rows_.find(tensor);
  if (it == rows_.end() || it->second.open_phases.empty()) return;
  Row& r = it->second;
  std::string events;
  append_event(
      events,
      {.name = r.open_phases.back(), .ph = "E", .ts = timestamp(), .pid = pid_, .tid = r.tid});
  r.open_phases.pop_back();
  append(events);
}

void Timeline::instant(std::string_view tensor, std::string_view name) {
  if (!active()) return;
  std::lock_guard lock(mu_);
  if (!active()) return;
  std::string events;
  const Row& r = row(tensor, events);
  append_event(
      events,
      {.name = name, .ph = "i", .ts = timestamp(), .pid = pid_, .tid = r.tid, .scope = "t"});
  append(events);
}

void Timeline::cycle() {
  if (!active()) return;
  std::lock_guard lock(mu_);
  if (!active() || !mark_cycles_) return;
  std::string events;
  append_event(events,
               {.name = "CYCLE_START", .ph = "i", .ts = timestamp(), .pid = pid_, .scope = "g"});
  append(events);
}

std::size_t Timeline::bytes() const {
  std::lock_guard lock(mu_);
  return size_;
}

Timeline::Row& Timeline::row(std::string_view tensor, std::string& events) {
  if (const auto it = rows_.find(tensor); it != rows_.end()) return it->second;
  Row& r = rows_.emplace(std::string(tensor), Row{.tid = next_tid_++}).first->second;
  const Args args = {{"name", std::string(tensor)}};
  append_event(events,
               {.name = "thread_name", .ph = "M", .pid = pid_, .tid = r.tid, .args = &args});
  return r;
}

void Timeline::append(const std::string& events) {
  if (stopped_) return;
  std::string text = events;
  if (max_bytes_ > 0 && size_ + events.size() + reserve_ > max_bytes_) {
    // Nothing after the marker: a trace that ends in it says plainly where the record stops.
    text = truncation_marker(pid_, max_bytes_, timestamp());
    stopped_ = true;
  }
  const std::size_t grown = text.size();
  text += kClose;
  if (const int err = pwrite_all(fd_.get(), text, size_ - kClose.size()); err != 0) {
    HOOP_LOG(kWarn, "timeline {}: {}; no further events are written", path_,
             errno_error("pwrite", err).message());
    stopped_ = true;
    return;
  }
  size_ += grown;
}

std::string Timeline::timestamp() const {
  const auto elapsed = std::chrono::steady_clock::now() - start_;
  return format_timestamp(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
}

namespace {

std::atomic<std::shared_ptr<Timeline>>& current() {
  static std::atomic<std::shared_ptr<Timeline>> timeline;
  return timeline;
}

}  // namespace

std::shared_ptr<Timeline> collectives_timeline() {
  return current().load(std::memory_order_acquire);
}

std::shared_ptr<Timeline> set_collectives_timeline(std::shared_ptr<Timeline> timeline) {
  return current().exchange(std::move(timeline), std::memory_order_acq_rel);
}

Status open_process_timeline(int rank) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (collectives_timeline() != nullptr || !config::is_set("HOOP_TIMELINE"))
    return Status::success();
  HOOP_ASSIGN_OR_RETURN(std::string path, config::get_string("HOOP_TIMELINE"));
  if (path.empty() || path == "DYNAMIC") return Status::success();
  HOOP_ASSIGN_OR_RETURN(std::int64_t max_bytes, config::get_int("HOOP_TIMELINE_MAX_BYTES"));
  const bool per_rank = path.find("%r") != std::string::npos;
  if (!per_rank && rank != 0) return Status::success();
  if (per_rank) path.replace(path.find("%r"), 2, std::to_string(rank));
  std::shared_ptr<Timeline> timeline = Timeline::idle(rank, static_cast<std::size_t>(max_bytes));
  HOOP_RETURN_IF_ERROR(timeline->start(path).with_context("HOOP_TIMELINE"));
  set_collectives_timeline(std::move(timeline));
  return Status::success();
}

}  // namespace hoop
