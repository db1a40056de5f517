// hoop::elastic's State and run() in one process (a job of one rank, no hooprun): saving,
// restoring and syncing buffers, and which failures run() resets on and which it rethrows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <vector>

#include "hoop/elastic.h"
#include "hoop/hoop.h"

namespace hoop::elastic {
namespace {

using ::testing::HasSubstr;

TEST(ElasticState, RestorePutsBackTheLastSave) {
  std::vector<float> weights{1, 2, 3};
  int epoch = 4;
  State state;
  state.add("weights", weights.data(), weights.size() * sizeof(float));
  state.add_value("epoch", epoch);
  state.restore();  // nothing saved yet: nothing changes
  EXPECT_EQ(epoch, 4);
  state.save();
  weights = {7, 8, 9};
  epoch = 5;
  state.restore();
  EXPECT_EQ(weights, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(epoch, 4);
}

TEST(ElasticState, NamesAreUniqueAndDataNotNull) {
  int a = 0;
  State state;
  state.add_value("a", a);
  try {
    state.add_value("a", a);
    FAIL() << "a second 'a' was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'a' was added already"));
  }
  EXPECT_THROW(state.add("null", nullptr, 4), Error);
  state.add("empty", nullptr, 0);
}

TEST(ElasticRun, OutsideAnElasticJobAFailureIsRethrownAndCallbacksDoNotRun) {
  ::unsetenv("HOOP_ELASTIC_ID");
  EXPECT_FALSE(enabled());
  int value = 1;
  int resets = 0;
  int calls = 0;
  State state;
  state.add_value("value", value);
  state.register_reset_callback([&] { ++resets; });
  try {
    run(state, [&] {
      ++calls;
      state.commit();  // one rank, no hooprun: no new round, no interrupt
      value = 2;
      throw Error(peer_lost("rank 1 died"));
    });
    FAIL() << "the failure was swallowed";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), StatusCode::kPeerLost);
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(resets, 0);
  EXPECT_EQ(round(), -1);
  EXPECT_FALSE(hosts_updated());
  shutdown();
}

TEST(ElasticRun, RunReturnsWhatTheFunctionDidAfterSyncingTheState) {
  int value = 3;
  State state;
  state.add_value("value", value);
  run(state, [&] { value += 1; });
  EXPECT_EQ(value, 4);
  state.restore();  // sync saved the state it started from
  EXPECT_EQ(value, 3);
  shutdown();
}

TEST(ElasticRun, OnlyFailuresAResetCanCureAreRecoverable) {
  for (StatusCode code : {StatusCode::kPeerLost, StatusCode::kTimeout, StatusCode::kIoError,
                          StatusCode::kProtocolError, StatusCode::kAborted})
    EXPECT_TRUE(recoverable(Status(code, "x"))) << status_code_name(code);
  for (StatusCode code : {StatusCode::kInvalidArgument, StatusCode::kMismatch,
                          StatusCode::kAuthFailed, StatusCode::kNotFound, StatusCode::kInternal})
    EXPECT_FALSE(recoverable(Status(code, "x"))) << status_code_name(code);
}

}  // namespace
}  // namespace hoop::elastic
