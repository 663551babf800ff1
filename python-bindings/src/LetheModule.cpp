//===- LetheModule.cpp - Python bindings over the C API -------------------===//
//
// The compiled part of the `lethe` package (`lethe._lethe`). It uses only the
// C API (lethe-c/Lethe.h): a failed call raises `lethe.LetheError` with the
// message Lethe produced. The Python-facing API is in lethe/__init__.py.
//
//===----------------------------------------------------------------------===//

#include "lethe-c/Lethe.h"

#include <pybind11/pybind11.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace py = pybind11;

namespace {

/// Raised (as lethe.LetheError) when a C API call fails.
struct LetheError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(LetheStatus status) {
  if (letheStatusIsSuccess(status))
    return;
  std::string message(status.message.data, status.message.length);
  letheStatusDestroy(status);
  throw LetheError(message);
}

std::string take(LetheString string) {
  std::string result(string.data, string.length);
  letheStringDestroy(string);
  return result;
}

class Graph;

/// Owns a LethePlan and keeps its graph alive.
class Plan {
public:
  Plan(LethePlan plan, std::shared_ptr<LetheGraphImpl> graph)
      : graph(std::move(graph)), plan(plan, &lethePlanDestroy) {}

  bool feasible() const { return lethePlanIsFeasible(plan.get()); }

  std::string json() const {
    LetheString text{nullptr, 0};
    check(lethePlanJson(plan.get(), &text));
    return take(text);
  }

  void writeTrace(const std::string &path) const {
    check(lethePlanWriteTrace(plan.get(), path.c_str()));
  }

private:
  // Declared first: destroyed after the plan that refers to it.
  std::shared_ptr<LetheGraphImpl> graph;
  std::shared_ptr<LethePlanImpl> plan;
};

/// Owns a LetheGraph.
class Graph {
public:
  explicit Graph(LetheGraph graph) : graph(graph, &letheGraphDestroy) {}

  static Graph load(const std::string &path, const std::string &device) {
    LetheGraph graph = nullptr;
    check(letheGraphLoadFile(path.c_str(), device.c_str(), &graph));
    return Graph(graph);
  }

  static Graph loads(const std::string &text, const std::string &format,
                     const std::string &name, const std::string &device) {
    LetheGraph graph = nullptr;
    check(letheGraphLoadString(text.data(), text.size(), format.c_str(),
                               name.c_str(), device.c_str(), &graph));
    return Graph(graph);
  }

  std::string report(unsigned top) const {
    LetheString json{nullptr, 0};
    check(letheGraphReport(graph.get(), top, &json));
    return take(json);
  }

  std::string mlir() const {
    LetheString text{nullptr, 0};
    check(letheGraphPrint(graph.get(), &text));
    return take(text);
  }

  void writeTrace(const std::string &path) const {
    check(letheGraphWriteTrace(graph.get(), path.c_str()));
  }

  /// Options as strings ("" = default) and numbers (0 = default).
  Plan plan(const std::string &budget, const std::string &policy, int everyN,
            const std::string &keepOps, bool offloadKept,
            const std::string &minOffloadBytes, const std::string &hostBudget,
            const std::string &solver, bool replayRng) const {
    auto orNull = [](const std::string &s) {
      return s.empty() ? nullptr : s.c_str();
    };
    LethePlanOptions options{};
    options.budget = orNull(budget);
    options.policy = orNull(policy);
    options.every_n = everyN;
    options.keep_ops = orNull(keepOps);
    options.offload_kept = offloadKept;
    options.min_offload_bytes = orNull(minOffloadBytes);
    options.host_budget = orNull(hostBudget);
    options.solver = orNull(solver);
    options.replay_rng = replayRng;
    LethePlan result = nullptr;
    check(letheGraphPlan(graph.get(), &options, &result));
    return Plan(result, graph);
  }

private:
  std::shared_ptr<LetheGraphImpl> graph;
};

} // namespace

PYBIND11_MODULE(_lethe, m) {
  m.doc() = "Lethe's compiled bindings (over the C API); use the `lethe` "
            "package rather than this module";
  py::register_exception<LetheError>(m, "LetheError", PyExc_ValueError);
  m.def("version", &letheVersion);
  // Loading and analysing release the GIL: they touch no Python object.
  py::class_<Graph>(m, "Graph")
      .def_static("load", &Graph::load, py::arg("path"), py::arg("device"),
                  py::call_guard<py::gil_scoped_release>())
      .def_static("loads", &Graph::loads, py::arg("text"), py::arg("format"),
                  py::arg("name"), py::arg("device"),
                  py::call_guard<py::gil_scoped_release>())
      .def("report", &Graph::report, py::arg("top"),
           py::call_guard<py::gil_scoped_release>())
      .def("mlir", &Graph::mlir, py::call_guard<py::gil_scoped_release>())
      .def("write_trace", &Graph::writeTrace, py::arg("path"),
           py::call_guard<py::gil_scoped_release>())
      .def("plan", &Graph::plan, py::arg("budget"), py::arg("policy"),
           py::arg("every_n"), py::arg("keep_ops"), py::arg("offload_kept"),
           py::arg("min_offload_bytes"), py::arg("host_budget"),
           py::arg("solver"), py::arg("replay_rng"),
           py::call_guard<py::gil_scoped_release>());
  py::class_<Plan>(m, "Plan")
      .def_property_readonly("feasible", &Plan::feasible)
      .def("json", &Plan::json, py::call_guard<py::gil_scoped_release>())
      .def("write_trace", &Plan::writeTrace, py::arg("path"),
           py::call_guard<py::gil_scoped_release>());
}
