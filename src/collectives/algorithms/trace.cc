#include "collectives/algorithms/trace.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

namespace hoop::collectives {
namespace {

// Every Communicator of the process shares this row; the runtime's tensors have rows of their
// own, so a fused response shows as the tensors' ALLREDUCE phase above the call it made here.
constexpr std::string_view kRow = "communicator";

}  // namespace

void Trace::attach(bool deferred) {
  std::shared_ptr<Timeline> t = collectives_timeline();
  if (t == nullptr || !t->active()) return;
  timeline_ = std::move(t);
  if (!deferred) start();
}

void Trace::start(std::string_view algorithm) {
  if (timeline_ == nullptr || begun_) return;
  begun_ = true;
  std::string phase = collective_name(kind_);
  std::transform(phase.begin(), phase.end(), phase.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  std::vector<std::pair<std::string, std::string>> args = {
      {"bytes", std::to_string(bytes_)},
      {"ranks", std::to_string(comm_.size())},
      {"transport", std::string(comm_.transport().name())}};
  if (!algorithm.empty()) args.emplace_back("algorithm", std::string(algorithm));
  timeline_->begin(kRow, phase, args);
}

void Trace::end() { timeline_->end(kRow); }

}  // namespace hoop::collectives
