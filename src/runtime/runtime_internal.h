// What the runtime's other parts (elastic.cc) may see of runtime.cc's job-wide state.
#pragma once

#include "hoop/rendezvous.h"

namespace hoop::runtime {

/// An elastic worker's store connection and the round it is in; {nullptr, -1} outside an
/// elastic job. The store lives until the next shutdown().
struct ElasticView {
  Store* store = nullptr;
  int round = -1;
};
/// Throws hoop::Error before init().
ElasticView elastic_view();

/// The elastic round this process last joined, whether or not the runtime is initialized
/// now (-1: none, or no elastic job).
int last_elastic_round();

/// An elastic worker's report to hooprun that its round failed with `cause`
/// (report_failed_elastic_round); logged, not thrown, when the store cannot take it. Does
/// nothing outside an elastic job or before init().
void report_elastic_failure(const Status& cause);

}  // namespace hoop::runtime
