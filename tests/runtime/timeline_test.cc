#include "core/timeline.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace hoop::runtime {
namespace {

// ordered_json keeps keys in file order, so the tests can check the field order too.
using Json = nlohmann::ordered_json;

class TimelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "hoop_timeline_XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    path_ = dir_ + "/trace.json";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Timeline> open(int pid = 3, std::size_t max_bytes = 0) {
    auto timeline = Timeline::open(path_, pid, max_bytes);
    EXPECT_TRUE(timeline.ok()) << timeline.status().to_string();
    return timeline.ok() ? std::move(timeline).value() : nullptr;
  }

  std::string contents() const {
    std::ifstream in(path_, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // The file parsed; a parse error fails the test and yields an empty array.
  Json events() const {
    const std::string text = contents();
    Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(parsed.is_discarded()) << "not valid JSON:\n" << text;
    EXPECT_TRUE(parsed.is_array());
    return parsed.is_array() ? parsed : Json::array();
  }

  std::string dir_;
  std::string path_;
};

std::vector<std::string> keys(const Json& event) {
  std::vector<std::string> out;
  for (const auto& [key, value] : event.items()) out.push_back(key);
  return out;
}

TEST_F(TimelineTest, OpenWritesProcessName) {
  auto timeline = open(/*pid=*/3);
  ASSERT_NE(timeline, nullptr);
  const Json trace = events();
  ASSERT_EQ(trace.size(), 1u);
  EXPECT_EQ(trace[0]["name"], "process_name");
  EXPECT_EQ(trace[0]["ph"], "M");
  EXPECT_EQ(trace[0]["pid"], 3);
  EXPECT_EQ(trace[0]["args"]["name"], "rank 3");
  EXPECT_EQ(timeline->bytes(), contents().size());
}

TEST_F(TimelineTest, EachEventLeavesValidJsonWithFieldsInOrder) {
  auto timeline = open(/*pid=*/1);
  ASSERT_NE(timeline, nullptr);
  timeline->begin("grad/w", "ALLREDUCE", {{"bytes", "4096"}, {"dtype", "f32"}});
  Json trace = events();
  ASSERT_EQ(trace.size(), 3u);  // process_name, thread_name, B
  EXPECT_EQ(trace[1]["name"], "thread_name");
  const Json b = trace[2];  // a copy: trace is re-read below
  EXPECT_EQ(keys(b), (std::vector<std::string>{"name", "ph", "ts", "pid", "tid", "args"}));
  EXPECT_EQ(b["name"], "ALLREDUCE");
  EXPECT_EQ(b["ph"], "B");
  EXPECT_TRUE(b["ts"].is_number());
  EXPECT_EQ(b["pid"], 1);
  EXPECT_EQ(b["tid"], trace[1]["tid"]);
  EXPECT_EQ(b["args"], Json({{"bytes", "4096"}, {"dtype", "f32"}}));
  EXPECT_EQ(timeline->bytes(), contents().size());

  timeline->instant("grad/w", "READY");
  trace = events();
  ASSERT_EQ(trace.size(), 4u);
  EXPECT_EQ(trace[3]["ph"], "i");
  EXPECT_EQ(trace[3]["name"], "READY");
  EXPECT_EQ(trace[3]["tid"], b["tid"]);

  timeline->end("grad/w");
  trace = events();
  ASSERT_EQ(trace.size(), 5u);
  const Json& e = trace[4];
  EXPECT_EQ(keys(e), (std::vector<std::string>{"name", "ph", "ts", "pid", "tid", "args"}));
  EXPECT_EQ(e["ph"], "E");
  EXPECT_EQ(e["name"], "ALLREDUCE");
  EXPECT_EQ(e["tid"], b["tid"]);
  EXPECT_LE(b["ts"].get<double>(), trace[3]["ts"].get<double>());
  EXPECT_LE(trace[3]["ts"].get<double>(), e["ts"].get<double>());
  EXPECT_EQ(timeline->bytes(), contents().size());

  timeline->end("grad/w");  // nothing open: nothing written
  timeline->end("never/seen");
  EXPECT_EQ(events().size(), 5u);
}

TEST_F(TimelineTest, NamesNeedingEscapesRoundTrip) {
  const std::string tensor = "a\"b\\c\nd\te\x01\x1f/caf\xc3\xa9/\xe2\x82\xac";
  const std::string phase = "ph\"ase\\\r";
  auto timeline = open();
  ASSERT_NE(timeline, nullptr);
  timeline->begin(tensor, phase, {{"k\"ey", "va\\l\nue"}});
  timeline->end(tensor);
  const Json trace = events();
  ASSERT_EQ(trace.size(), 4u);
  EXPECT_EQ(trace[1]["args"]["name"], tensor);
  EXPECT_EQ(trace[2]["name"], phase);
  EXPECT_EQ(trace[2]["args"]["k\"ey"], "va\\l\nue");
  EXPECT_EQ(trace[3]["name"], phase);
  EXPECT_NE(contents().find("\\u0001"), std::string::npos);
}

TEST_F(TimelineTest, InvalidUtf8BecomesReplacementCharacter) {
  auto timeline = open();
  ASSERT_NE(timeline, nullptr);
  timeline->instant("bad\xff\xc3(\xed\xa0\x80", "x");  // stray byte, cut sequence, surrogate
  const Json trace = events();
  ASSERT_EQ(trace.size(), 3u);
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(trace[1]["args"]["name"], "bad" + fffd + fffd + "(" + fffd + fffd + fffd);
}

TEST_F(TimelineTest, OneRowPerTensor) {
  auto timeline = open();
  ASSERT_NE(timeline, nullptr);
  timeline->begin("a", "NEGOTIATE");
  timeline->begin("b", "NEGOTIATE");
  timeline->end("a");
  timeline->begin("a", "ALLREDUCE");
  timeline->instant("b", "WAIT");
  timeline->end("a");
  timeline->end("b");
  std::map<std::string, int> tid_of;  // tensor -> tid, from thread_name metadata
  std::multiset<int> event_tids;
  for (const Json& event : events()) {
    if (event["name"] == "thread_name") {
      EXPECT_EQ(event["ph"], "M");
      EXPECT_TRUE(tid_of.emplace(event["args"]["name"], event["tid"]).second);
    } else if (event["ph"] != "M") {
      event_tids.insert(event["tid"].get<int>());
    }
  }
  ASSERT_EQ(tid_of.size(), 2u);
  EXPECT_NE(tid_of["a"], tid_of["b"]);
  EXPECT_EQ(event_tids.count(tid_of["a"]), 4u);
  EXPECT_EQ(event_tids.count(tid_of["b"]), 3u);
}

TEST_F(TimelineTest, ConcurrentWritersProduceEveryEvent) {
  constexpr int kThreads = 4;
  constexpr int kIterations = 250;
  auto timeline = open();
  ASSERT_NE(timeline, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string tensor = "tensor" + std::to_string(t);
      for (int i = 0; i < kIterations; ++i) {
        timeline->begin(tensor, "ALLREDUCE", {{"i", std::to_string(i)}});
        timeline->instant("shared", "TICK");
        timeline->end(tensor);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::map<int, int> depth;  // tid -> open B events, never negative
  int begins = 0, ends = 0, instants = 0, rows = 0;
  for (const Json& event : events()) {
    const int tid = event["tid"];
    if (event["ph"] == "B") {
      ++begins;
      ++depth[tid];
    } else if (event["ph"] == "E") {
      ++ends;
      EXPECT_GE(--depth[tid], 0);
    } else if (event["ph"] == "i") {
      ++instants;
    }
    if (event["name"] == "thread_name") ++rows;
  }
  EXPECT_EQ(begins, kThreads * kIterations);
  EXPECT_EQ(ends, kThreads * kIterations);
  EXPECT_EQ(instants, kThreads * kIterations);
  EXPECT_EQ(rows, kThreads + 1);
  EXPECT_EQ(timeline->bytes(), contents().size());
}

TEST_F(TimelineTest, MaxBytesBoundsTheFileAndEndsWithMarker) {
  constexpr std::size_t kMax = 2000;
  auto timeline = open(/*pid=*/0, kMax);
  ASSERT_NE(timeline, nullptr);
  for (int i = 0; i < 100; ++i) {
    timeline->begin("tensor" + std::to_string(i % 3), "ALLREDUCE", {{"i", std::to_string(i)}});
    timeline->end("tensor" + std::to_string(i % 3));
    ASSERT_LE(contents().size(), kMax);
    ASSERT_EQ(timeline->bytes(), contents().size());
  }
  const Json trace = events();
  ASSERT_GT(trace.size(), 3u);
  EXPECT_EQ(trace.back()["name"], "TIMELINE_TRUNCATED");
  EXPECT_EQ(trace.back()["ph"], "i");
  int markers = 0;
  for (const Json& event : trace) markers += event["name"] == "TIMELINE_TRUNCATED";
  EXPECT_EQ(markers, 1);
}

TEST_F(TimelineTest, MaxBytesTooSmallForTheMarkerIsRejected) {
  auto timeline = Timeline::open(path_, 0, 64);
  ASSERT_FALSE(timeline.ok());
  EXPECT_EQ(timeline.status().code(), StatusCode::kInvalidArgument);
}

// Forks a child that writes `events` begin/end pairs to `path` and then, with `keep_writing`,
// goes on writing until killed, or else waits to be killed. Returns once the pairs are written.
pid_t spawn_writer(const std::string& path, int events, bool keep_writing) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(ready[0]);
    auto timeline = Timeline::open(path, 7, 0);
    if (!timeline.ok()) ::_exit(1);
    for (long i = 0; keep_writing || i < events; ++i) {
      (*timeline)->begin("grad" + std::to_string(i % 5), "ALLREDUCE");
      (*timeline)->end("grad" + std::to_string(i % 5));
      if (i + 1 == events) (void)!::write(ready[1], "x", 1);
    }
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char byte = 0;
  const bool started = child > 0 && ::read(ready[0], &byte, 1) == 1;
  ::close(ready[0]);
  if (child > 0 && !started) ::kill(child, SIGKILL);
  return started ? child : -1;
}

// SIGKILLs `child` and reaps it; true when it died of the signal.
bool kill_and_reap(pid_t child) {
  ::kill(child, SIGKILL);
  int status = 0;
  return ::waitpid(child, &status, 0) == child && WIFSIGNALED(status);
}

TEST_F(TimelineTest, FileParsesAfterSigkill) {
  constexpr int kPairs = 1000;
  const pid_t child = spawn_writer(path_, kPairs, /*keep_writing=*/false);
  ASSERT_GT(child, 0) << "the child did not start writing";
  ASSERT_TRUE(kill_and_reap(child));
  EXPECT_EQ(events().size(), 1u + 5u + 2u * kPairs);  // process_name, 5 rows, B/E pairs
}

// Linux copies a write into the page cache page by page and gives up between pages once SIGKILL
// is pending, so a kill inside a write across a page boundary cuts the file there; no append-only
// format avoids that. Anywhere else the file must parse.
TEST_F(TimelineTest, SigkillWhileWritingCutsAtMostAtAPageBoundary) {
  const pid_t child = spawn_writer(path_, 500, /*keep_writing=*/true);
  ASSERT_GT(child, 0) << "the child did not start writing";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(kill_and_reap(child));
  const std::string text = contents();
  if (text.size() % 4096 == 0 && !Json::accept(text)) GTEST_SKIP() << "killed mid-page-crossing";
  EXPECT_GT(events().size(), 1000u);
}

TEST_F(TimelineTest, OpenInMissingDirectoryNamesThePath) {
  const std::string path = dir_ + "/missing/trace.json";
  auto timeline = Timeline::open(path, 0, 0);
  ASSERT_FALSE(timeline.ok());
  EXPECT_EQ(timeline.status().code(), StatusCode::kIoError);
  EXPECT_NE(timeline.status().message().find(path), std::string::npos)
      << timeline.status().message();
  EXPECT_NE(timeline.status().message().find("No such file"), std::string::npos)
      << timeline.status().message();
}

TEST_F(TimelineTest, AnIdleTimelineWritesNothingUntilStarted) {
  auto timeline = Timeline::idle(/*pid=*/0, 0);
  EXPECT_FALSE(timeline->active());
  timeline->begin("before", "ALLREDUCE");
  timeline->end("before");
  timeline->cycle();
  EXPECT_FALSE(std::filesystem::exists(path_));
  ASSERT_TRUE(timeline->start(path_, /*mark_cycles=*/true).ok());
  EXPECT_TRUE(timeline->active());
  timeline->end("before");  // begun while idle: nothing to end in this file
  timeline->cycle();
  timeline->begin("during", "ALLREDUCE");
  timeline->end("during");
  timeline->stop();
  EXPECT_FALSE(timeline->active());
  timeline->begin("after", "ALLREDUCE");
  std::vector<std::string> seen;
  for (const Json& e : events())
    seen.push_back(e["name"].get<std::string>() + ":" + e["ph"].get<std::string>() +
                   (e["args"].contains("name") ? ":" + e["args"]["name"].get<std::string>() : ""));
  EXPECT_EQ(seen, (std::vector<std::string>{"process_name:M:rank 0", "CYCLE_START:i",
                                            "thread_name:M:during", "ALLREDUCE:B", "ALLREDUCE:E"}));
}

TEST_F(TimelineTest, ARestartBeginsACompleteNewFileAndLeavesTheOldOne) {
  auto timeline = open(/*pid=*/2);
  ASSERT_NE(timeline, nullptr);
  timeline->begin("first", "NEGOTIATE");
  timeline->cycle();  // not marked: started without mark_cycles
  const std::string first_path = path_;
  path_ = dir_ + "/second.json";
  ASSERT_TRUE(timeline->start(path_).ok());
  timeline->end("first");  // its row belongs to the old file
  timeline->begin("second", "ALLREDUCE");
  const Json second = events();
  ASSERT_EQ(second.size(), 3u);
  EXPECT_EQ(second[1]["args"]["name"], "second");
  path_ = first_path;
  const Json first = events();  // still a complete trace, the open phase left open
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[2]["name"], "NEGOTIATE");
  EXPECT_EQ(first[2]["ph"], "B");
}

TEST_F(TimelineTest, AFailedStartLeavesItStopped) {
  auto timeline = open();
  ASSERT_NE(timeline, nullptr);
  const Status s = timeline->start(dir_ + "/missing/trace.json");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_FALSE(timeline->active());
  timeline->begin("t", "ALLREDUCE");  // nothing to write to, and no crash
}

}  // namespace
}  // namespace hoop::runtime
