// hoop._hoop's elastic driver half, for hoop.ray's ElasticRayExecutor: the rounds an elastic job
// publishes in its store (rendezvous.h), so that a Python driver can do what hooprun's elastic
// driver does (launch/elastic.cc): publish who takes part with which rank, read the rounds the
// workers report failed, and see which ranks joined.
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "adapters/torch/comm_binding.h"
#include "hoop/rendezvous.h"

namespace hoop::python {
namespace {

namespace py = pybind11;

/// (rank, size, local_rank, local_size, cross_rank, cross_size), as Python passes a place.
using PlaceTuple = std::tuple<int, int, int, int, int, int>;

/// A client of an elastic job's store, for the driver.
class ElasticRounds {
 public:
  ElasticRounds(const std::string& host, int port, const std::string& secret,
                const std::string& job_id, double timeout_s) {
    const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
    Result<std::unique_ptr<Store>> store = [&] {
      py::gil_scoped_release release;
      return Store::connect(host, static_cast<std::uint16_t>(port),
                            StoreOptions{secret, job_id, timeout});
    }();
    if (!store.ok()) raise(store.status().with_context("hoop elastic driver store"));
    store_ = std::move(*store);
  }

  void publish(int round, const std::vector<std::pair<std::string, PlaceTuple>>& workers) {
    std::vector<std::pair<std::string, ElasticPlace>> places;
    for (const auto& [id, t] : workers) {
      ElasticPlace p;
      std::tie(p.rank, p.size, p.local_rank, p.local_size, p.cross_rank, p.cross_size) = t;
      places.emplace_back(id, p);
    }
    py::gil_scoped_release release;
    if (Status s = publish_elastic_round(*store_, round, places); !s.ok()) {
      py::gil_scoped_acquire acquire;
      raise(s);
    }
  }

  std::tuple<std::vector<int>, double, std::string> failed(int round, int size) {
    Result<FailedElasticRound> r = [&] {
      py::gil_scoped_release release;
      return failed_elastic_round(*store_, round, size);
    }();
    if (!r.ok()) raise(r.status());
    return {r->ranks, r->timeout.count() / 1e3, r->cause};
  }

  bool joined(int round, int rank) {
    Result<bool> r = [&] {
      py::gil_scoped_release release;
      return elastic_rank_joined(*store_, round, rank);
    }();
    if (!r.ok()) raise(r.status());
    return *r;
  }

 private:
  std::unique_ptr<Store> store_;
};

}  // namespace

void define_elastic_driver(py::module_& m) {
  py::class_<ElasticRounds>(m, "ElasticRounds",
                            "The rounds of an elastic job, published in its store by a driver.")
      .def(py::init<const std::string&, int, const std::string&, const std::string&, double>(),
           py::arg("host"), py::arg("port"), py::arg("secret"), py::arg("job_id"),
           py::arg("timeout_s"))
      .def("publish", &ElasticRounds::publish, py::arg("round"), py::arg("workers"),
           "Publishes round `round`: [(worker id, (rank, size, local_rank, local_size, "
           "cross_rank, cross_size))].")
      .def("failed", &ElasticRounds::failed, py::arg("round"), py::arg("size"),
           "The ranks that reported round `round` failed, the longest HOOP_TIMEOUT_SECONDS they "
           "gave (s) and the first cause: ([], 0, '') when none did.")
      .def("joined", &ElasticRounds::joined, py::arg("round"), py::arg("rank"),
           "Whether `rank` of round `round` has joined it.");
}

}  // namespace hoop::python
