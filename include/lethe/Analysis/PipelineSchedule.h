//===- PipelineSchedule.h - Order of a pipeline stage's work ----*- C++ -*-===//
//
// Pipeline parallelism splits a model into chunks (virtual stages) and runs
// many micro-batches through them. A stage's program is a sequence of steps,
// each the forward or the backward of one chunk for one micro-batch, in the
// order the schedule dictates:
//
// - 1F1B (PipeDream-flush, Megatron's non-interleaved schedule): stage S of
//   P runs min(P-S-1, M) warm-up forwards, then alternates one forward and
//   one backward, then runs the remaining backwards.
// - Interleaved (Megatron-LM's schedule with V virtual stages per stage):
//   stage S holds chunks S, S+P, ..., S+(V-1)P; micro-batches go through
//   the chunks in groups of P; (P-S-1)*2 + (V-1)*P warm-up forwards (all of
//   them when M == P), then one forward and one backward alternately, then
//   the remaining backwards.
//
// Pure functions of the options: every rank derives the same schedule.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_ANALYSIS_PIPELINESCHEDULE_H
#define LETHE_ANALYSIS_PIPELINESCHEDULE_H

#include "lethe/Dialect/Lethe/IR/LetheAttrs.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lethe {

// PipelineScheduleKind ("1f1b" | "interleaved") and its symbolize /
// stringify are the dialect's enum (LetheAttrs.td), which #lethe.pipeline
// records.

struct PipelineStep {
  /// Fwd or Bwd.
  Phase phase = Phase::Fwd;
  /// The chunk (virtual stage), in [0, stages * vpp): chunk c runs on stage
  /// c % stages.
  int chunk = 0;
  int microbatch = 0;
  /// Communication happens between units, as one group (ncclGroupStart /
  /// End): the sends of the unit before and the receives of the unit
  /// after, Megatron's combined p2p calls. In 1F1B every step is a unit
  /// (send_forward_recv_backward after a forward); in the interleaved
  /// schedule a steady-state forward + backward pair is one unit, so a
  /// forward's output is sent only after the paired backward — with a group
  /// after every step that schedule deadlocks (tested).
  int unit = 0;

  bool operator==(const PipelineStep &other) const {
    return phase == other.phase && chunk == other.chunk &&
           microbatch == other.microbatch;
  }
};

struct PipelineOptions {
  int stages = 1;
  int microbatches = 1;
  PipelineScheduleKind kind = PipelineScheduleKind::OneFOneB;
  /// Chunks per stage (1 for 1F1B).
  int vpp = 1;
};

/// Checks the options: stages, microbatches, vpp >= 1; 1F1B has vpp = 1;
/// the interleaved schedule needs microbatches to be a multiple of stages
/// (Megatron's micro-batch groups). The message names the option.
llvm::Error verifyPipelineOptions(const PipelineOptions &options);

/// The steps of `stage`, in execution order: every (phase, chunk of the
/// stage, micro-batch) exactly once. The options must verify.
std::vector<PipelineStep> pipelineSchedule(const PipelineOptions &options,
                                           int stage);

/// "F3" / "B0" for chunk-per-stage schedules, "F3.1" (micro-batch 3, the
/// stage's local chunk 1) when vpp > 1: the textbook notation tests use.
std::string formatPipelineSteps(const std::vector<PipelineStep> &steps,
                                const PipelineOptions &options);

/// One point-to-point op of a stage's program: a send to or a receive from
/// `peer` of the transfer `message` (an id both sides agree on).
struct PipelineCommOp {
  bool send = false;
  int peer = 0;
  int64_t message = 0;
};

/// A stage's communication: its groups in program order, each issued as one
/// NCCL group (ncclGroupStart/End) between two compute units.
using PipelineCommGroups = std::vector<std::vector<PipelineCommOp>>;

/// Checks the programs of all stages (indexed by stage): the k-th send from
/// stage A to stage B must carry the message of the k-th receive on B from
/// A (NCCL matches point-to-point ops by order), and running the groups
/// under rendezvous semantics (an op completes once it and its partner are
/// both issued; a stage moves on once its group has completed) must finish.
/// Returns an empty string, or what is wrong.
std::string
checkPipelineCommunication(const std::vector<PipelineCommGroups> &stages);

} // namespace lethe

#endif // LETHE_ANALYSIS_PIPELINESCHEDULE_H
