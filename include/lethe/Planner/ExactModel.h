//===- ExactModel.h - The cost model of the exact `auto` solver -*- C++ -*-===//
//
// The exact solver minimises step time over every retain / recompute /
// offload plan under this model, which docs/ExactSolver.md states in full:
// program points (every node, plus one recompute segment before each
// backward node where a recompute may run), the bytes resident at each
// point, a D2H and an H2D copy channel served first-in first-out, and the
// compute stream's timeline with its stalls. The MILP (ExactSolver.cpp)
// encodes this model; `evaluate` computes it directly for one plan, which
// is how the solver measures the plan it returns and how tests check, by
// enumerating every plan of small graphs, that the MILP finds the optimum.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PLANNER_EXACTMODEL_H
#define LETHE_PLANNER_EXACTMODEL_H

#include "lethe/Planner/Plan.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace lethe {

struct DeviceProfile;

class ExactModel {
public:
  /// An activation: a storage produced before the first backward node and
  /// used, through any alias, at or after it.
  struct Activation {
    ValueId value = -1;
    int64_t bytes = 0;
    NodeId producer = -1;
    /// Last use before the first backward node (the producer if none).
    NodeId lastForwardUse = -1;
    NodeId firstBackwardUse = -1;
    /// Last use, or the last node when the step returns the storage.
    NodeId lastUse = -1;
    bool canRecompute = false;
    bool canOffload = false;
    /// Copy times on the D2H and H2D channels.
    double d2hUs = 0.0;
    double h2dUs = 0.0;
    /// Forward nodes that read this storage (through any alias) and may be
    /// re-run: a recompute of theirs needs this storage resident.
    std::vector<NodeId> rerunConsumers;
    /// Forward-produced values of this storage that backward nodes read, as
    /// (producing node, first backward node reading the value). Recomputing
    /// the storage re-runs each producing node before that reader.
    std::vector<std::pair<NodeId, NodeId>> backwardReads;
  };

  /// A program point: a node, or the segment just before the backward node
  /// `node`, where re-runs run and prefetches are waited for.
  struct Point {
    bool segment = false;
    NodeId node = -1;
    /// Start of the node (or segment) in the unplanned timeline.
    double nominalStartUs = 0.0;
    /// Bytes resident here whatever the plan: storages without a decision
    /// and the forward part of every activation.
    int64_t fixedBytes = 0;
    /// A segment where some node may re-run. At other segments the bytes
    /// resident never exceed those at the node that follows.
    bool rerunsPossible = false;
  };

  /// What the model predicts for one plan.
  struct Evaluation {
    /// False when the plan breaks a rule of the model; `error` says which.
    bool valid = false;
    std::string error;
    bool fitsBudget = false;
    int64_t peakBytes = 0;
    /// Index into points() of the (first) peak.
    int peakPoint = -1;
    int64_t hostBytes = 0;
    double stepUs = 0.0;
    /// Bytes resident at each point.
    std::vector<int64_t> bytesAt;
    /// Per node: the backward node before which it is re-run, or -1.
    std::vector<NodeId> rerunBefore;
  };

  ExactModel(const TrainingGraph &graph, const DeviceProfile &device,
             const PlanOptions &options);

  const TrainingGraph &getGraph() const { return graph; }
  const PlanOptions &getOptions() const { return options; }
  llvm::ArrayRef<Activation> activations() const { return acts; }
  llvm::ArrayRef<Point> points() const { return pointList; }
  /// First backward node (numNodes() when the step has no backward part).
  NodeId firstBackward() const { return firstBwd; }
  size_t numNodes() const { return nodeTime.size(); }
  double nodeTimeUs(NodeId node) const { return nodeTime[node]; }
  double nominalStartUs(NodeId node) const { return nominalStart[node]; }
  /// End of the forward part in every plan (no stall happens there).
  double forwardEndUs() const { return forwardEnd; }
  /// Index into activations() of the storage `value` owns, or -1.
  int activationOf(ValueId value) const { return actOfValue[value]; }
  /// Whether a forward node may be re-run by a recompute at all.
  bool canRerun(NodeId node) const { return rerunnable[node]; }
  /// The backward nodes before which `node` may be re-run, ascending.
  llvm::ArrayRef<NodeId> rerunPoints(NodeId node) const {
    return rerunPointsOf[node];
  }
  /// Forward nodes that may be re-run and read the forward temporary
  /// (non-activation storage) owned by `value`, through any alias.
  llvm::ArrayRef<NodeId> rerunConsumersOfTemp(ValueId value) const {
    return tempConsumers[value];
  }
  /// Point index of node `node`, and of the segment before it (-1 for
  /// forward nodes).
  int nodePoint(NodeId node) const { return nodePointOf[node]; }
  int segmentPoint(NodeId node) const { return segmentPointOf[node]; }
  /// Activations in D2H order (production order) and H2D order (first
  /// backward use, then value id).
  llvm::ArrayRef<int> d2hOrder() const { return d2hOrderList; }
  llvm::ArrayRef<int> h2dOrder() const { return h2dOrderList; }
  /// Nodes the H2D copy of activation `act` may be issued after:
  /// firstBackward()-1 .. firstBackwardUse-1.
  NodeId earliestPrefetchAfter() const { return firstBwd - 1; }

  /// Evaluates a plan: `decisions` holds one entry per activation, in
  /// activations() order; only `decision` and (for offload) `prefetchAfter`
  /// are read.
  Evaluation evaluate(llvm::ArrayRef<ActivationDecision> decisions) const;

  /// Builds the plan's decisions (value, decision, first backward use,
  /// prefetch placement, recomputed nodes) from per-activation choices.
  std::vector<ActivationDecision>
  makeDecisions(llvm::ArrayRef<Decision> choice,
                llvm::ArrayRef<NodeId> prefetchAfter) const;

  /// The all-retain plan.
  std::vector<ActivationDecision> retainAll() const;

private:
  void analyse(const DeviceProfile &device);

  const TrainingGraph &graph;
  PlanOptions options;
  NodeId firstBwd = 0;
  std::vector<double> nodeTime;
  std::vector<double> nominalStart;
  double forwardEnd = 0.0;
  std::vector<Activation> acts;
  std::vector<int> actOfValue;
  /// Per storage owner: first and last node it is live at (-1: none).
  std::vector<NodeId> liveStart, liveEnd;
  std::vector<bool> rerunnable;
  std::vector<std::vector<NodeId>> tempConsumers;
  std::vector<std::vector<NodeId>> rerunPointsOf;
  std::vector<Point> pointList;
  std::vector<int> nodePointOf, segmentPointOf;
  std::vector<int> d2hOrderList, h2dOrderList;
};

} // namespace lethe

#endif // LETHE_PLANNER_EXACTMODEL_H
