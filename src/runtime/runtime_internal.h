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

}  // namespace hoop::runtime
