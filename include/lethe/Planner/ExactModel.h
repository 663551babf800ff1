//===- ExactModel.h - The cost model of the exact `auto` solver -*- C++ -*-===//
//
// The exact solver minimises step time over every retain / recompute /
// offload plan under this model, which docs/ExactSolver.md states in full.
// It follows the planner's own rules (ActivationAnalysis: what may be
// recomputed or offloaded, recompute chains; Placement: restore points
// moved earlier for chains that read them, chains run once per restore
// point, releases and prefetches anchored after nodes) and predicts what the
// schedule builder and simulator do with a plan as closely as a linear
// program can: memory at every program point (each node, and the segment
// before each backward node), a FIFO D2H channel, and the H2D channel as
// bandwidth-limited windows of the backward part.
//
// The MILP (ExactMilp.cpp) encodes this model; `evaluate` computes it
// directly for one plan, which is how the solver measures the plan it
// returns and how tests check, by enumerating every plan of small graphs,
// that the MILP finds the optimum.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PLANNER_EXACTMODEL_H
#define LETHE_PLANNER_EXACTMODEL_H

#include "lethe/Planner/Activations.h"
#include "lethe/Planner/Plan.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace lethe {

struct DeviceProfile;

class ExactModel {
public:
  /// An activation (ActivationAnalysis order: by storage id) with what the
  /// model needs about it.
  struct Activation {
    ValueId value = -1;
    int64_t bytes = 0;
    NodeId producer = -1;
    NodeId lastForwardUse = -1;
    NodeId firstBackwardUse = -1;
    /// Last use (the last node when the step returns the storage).
    NodeId lastUse = -1;
    /// The D2H copy starts after this node (producer or last in-place
    /// write).
    NodeId contentReadyAfter = -1;
    bool canRecompute = false;
    bool canOffload = false;
    /// A checkpoint (ActivationInfo::checkpoint): the backward does not read
    /// it, only the recompute chains that run through it do.
    bool checkpoint = false;
    /// Copy times as the planner's placement charges them
    /// (lethe::plannedCopyCosts).
    double d2hUs = 0.0;
    double h2dUs = 0.0;
    /// Recompute chain and the activations it reads; the view nodes re-run
    /// after a prefetch and the activations they read (ActivationAnalysis).
    std::vector<NodeId> recomputeNodes, rederiveNodes;
    std::vector<int> recomputeInputs, rederiveInputs;
    /// Activations whose recompute chain / rederive views read this one.
    std::vector<int> recomputeReaders, rederiveReaders;
    /// Backward nodes before which this activation may be restored,
    /// ascending: its first backward use and, for chains that read it,
    /// theirs (empty when it can only be retained).
    std::vector<NodeId> restorePoints;
  };

  /// A program point: a node, or the segment just before the backward node
  /// `node`, where recompute chains run and prefetches are waited for.
  struct Point {
    bool segment = false;
    NodeId node = -1;
    /// Start of the node (or segment) in the unplanned timeline.
    double nominalStartUs = 0.0;
    /// Bytes resident here whatever the plan: storages without a decision
    /// and the forward part of every activation.
    int64_t fixedBytes = 0;
    /// A segment where a recompute chain may run. At other segments the
    /// bytes resident never exceed those at the node that follows.
    bool chainsPossible = false;
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
    /// Per activation: restore point (-1 when retained) and, for offloads,
    /// the node after which the device buffer is released.
    std::vector<NodeId> restore;
    std::vector<NodeId> releaseAfter;
  };

  ExactModel(const TrainingGraph &graph, const DeviceProfile &device,
             const PlanOptions &options);

  const TrainingGraph &getGraph() const { return graph; }
  const ActivationAnalysis &getAnalysis() const { return analysis; }
  const PlanOptions &getOptions() const { return options; }
  llvm::ArrayRef<Activation> activations() const { return acts; }
  llvm::ArrayRef<Point> points() const { return pointList; }
  /// First backward node (numNodes() when the step has no backward part).
  NodeId firstBackward() const { return firstBwd; }
  size_t numNodes() const { return nodeTime.size(); }
  /// Time on the compute stream (0 for collectives, which run on the comm
  /// stream).
  double nodeTimeUs(NodeId node) const { return nodeTime[node]; }
  double nominalStartUs(NodeId node) const { return nominalStart[node]; }
  /// End of the forward part in every plan (no stall happens there).
  double forwardEndUs() const { return forwardEnd; }
  /// Point index of node `node`, and of the segment before it (-1 for
  /// forward nodes).
  int nodePoint(NodeId node) const { return nodePointOf[node]; }
  int segmentPoint(NodeId node) const { return segmentPointOf[node]; }
  /// Offloadable activations in D2H order (content ready, then storage).
  llvm::ArrayRef<int> d2hOrder() const { return d2hOrderList; }
  /// The earliest node a prefetch may be issued after: the last forward
  /// node.
  NodeId earliestPrefetchAfter() const { return firstBwd - 1; }
  /// D2H completion of activation `act` if every offloadable activation
  /// were offloaded (an upper bound on its completion in any plan).
  double latestD2hEndUs(int act) const { return d2hLatest[act]; }

  /// Evaluates a plan: `decisions` holds one entry per activation, in
  /// activations() order; only `decision` and (for offload)
  /// `prefetchAfter` are read: restore points, chains and releases follow
  /// from them.
  Evaluation evaluate(llvm::ArrayRef<ActivationDecision> decisions) const;

  /// The placed decisions of a plan given per-activation choices and
  /// prefetch placements: restore points, recompute / rederive nodes,
  /// releases.
  std::vector<ActivationDecision>
  makeDecisions(llvm::ArrayRef<Decision> choice,
                llvm::ArrayRef<NodeId> prefetchAfter) const;

  /// The all-retain plan.
  std::vector<ActivationDecision> retainAll() const;

private:
  void analyse(const DeviceProfile &device);
  /// Restore point per activation (-1 for retained) under the planner's
  /// rule; empty string or an error.
  std::string restorePoints(llvm::ArrayRef<Decision> choice,
                            std::vector<NodeId> &restore) const;
  /// D2H completion per offloaded activation.
  std::vector<double> d2hEnds(llvm::ArrayRef<Decision> choice) const;
  /// The node after which an offloaded activation's device buffer is
  /// released, given its D2H completion: the last node before the first
  /// point (after its last forward use) whose nominal start is at or after
  /// the completion.
  NodeId releaseNode(int act, double d2hEnd) const;

  const TrainingGraph &graph;
  PlanOptions options;
  ActivationAnalysis analysis;
  NodeId firstBwd = 0;
  std::vector<double> nodeTime;
  std::vector<double> nominalStart;
  double forwardEnd = 0.0;
  std::vector<Activation> acts;
  std::vector<double> d2hLatest;
  std::vector<Point> pointList;
  std::vector<int> nodePointOf, segmentPointOf;
  std::vector<int> d2hOrderList;
};

} // namespace lethe

#endif // LETHE_PLANNER_EXACTMODEL_H
