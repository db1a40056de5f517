// A worker of an elastic job for hooprun_elastic_test: adds size/size = 1 to a counter per
// step through an allreduce, commits every 5 steps, and checks at the end that the counter
// equals the step count: a reset that lost or repeated a step would show. Its fake host is
// $FAKEHOST (hooprun --spawner "env FAKEHOST={host}").
//
//   elastic_worker STEPS [mismatch|nocommit|stall]
// "mismatch": rank 1 of the first round submits a different shape at step 3, which no reset
// can cure: the error must end the worker instead of a new round. "nocommit": never commits,
// so never learns of a new round, and finishes in the round it started in. "stall": rank 1 of
// round 0 submits another tensor at step 3, so both ranks stall (HOOP_STALL_SHUTDOWN_SECONDS
// ends the round on both, and no process ends).
#include <hoop/elastic.h>
#include <hoop/hoop.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::int64_t steps = std::atoll(argv[1]);
  const std::string mode = argc > 2 ? argv[2] : "";
  const bool mismatch = mode == "mismatch";
  const char* host = std::getenv("FAKEHOST");
  try {
    hoop::init();
    double value = 0;
    std::int64_t step = 0;
    hoop::elastic::State state;
    state.add_value("value", value);
    state.add_value("step", step);
    bool announced = false;
    hoop::elastic::run(state, [&] {
      while (step < steps) {
        double sum[2] = {1, 1};
        const bool odd = mismatch && step == 3 && hoop::rank() == 1;
        const bool stall =
            mode == "stall" && step == 3 && hoop::rank() == 1 && hoop::elastic::round() == 0;
        hoop::Tensor t{sum, hoop::DataType::kF64, {odd ? 2 : 1}};
        hoop::allreduce(stall ? "other" : "one", t, t, {.op = hoop::ReduceOp::kSum});
        value += sum[0] / hoop::size();
        ++step;
        if (!announced) {
          std::printf("READY host=%s pid=%d\n", host ? host : "?", static_cast<int>(getpid()));
          std::fflush(stdout);
          announced = true;
        }
        if (step % 5 == 0 && mode != "nocommit") state.commit();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
    std::printf("DONE rank %d size %d value %.0f\n", hoop::rank(), hoop::size(), value);
    const bool exact = value == static_cast<double>(steps);
    hoop::shutdown();
    return exact ? 0 : 5;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "elastic_worker: %s\n", e.what());
    return 1;
  }
}
