//===- PipelineSchedule.cpp - Order of a pipeline stage's work ------------===//

#include "lethe/Analysis/PipelineSchedule.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

using namespace lethe;

llvm::Error lethe::verifyPipelineOptions(const PipelineOptions &options) {
  auto fail = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (options.stages < 1)
    return fail("stages must be >= 1, got " + llvm::Twine(options.stages));
  if (options.microbatches < 1)
    return fail("microbatches must be >= 1, got " +
                llvm::Twine(options.microbatches));
  if (options.vpp < 1)
    return fail("vpp must be >= 1, got " + llvm::Twine(options.vpp));
  if (options.kind == PipelineScheduleKind::OneFOneB && options.vpp != 1)
    return fail("the 1f1b schedule has one chunk per stage (vpp=1); use "
                "schedule=interleaved for vpp=" +
                llvm::Twine(options.vpp));
  if (options.kind == PipelineScheduleKind::Interleaved &&
      options.microbatches % options.stages != 0)
    return fail("the interleaved schedule runs micro-batches in groups of "
                "stages: microbatches (" +
                llvm::Twine(options.microbatches) +
                ") must be a multiple of stages (" +
                llvm::Twine(options.stages) + ")");
  return llvm::Error::success();
}

static std::vector<PipelineStep> oneFOneB(const PipelineOptions &options,
                                          int stage) {
  int microbatches = options.microbatches;
  int warmup = std::min(options.stages - stage - 1, microbatches);
  std::vector<PipelineStep> steps;
  int unit = 0;
  for (int mb = 0; mb < warmup; ++mb)
    steps.push_back({Phase::Fwd, stage, mb, unit++});
  for (int mb = 0; mb + warmup < microbatches; ++mb) {
    steps.push_back({Phase::Fwd, stage, mb + warmup, unit++});
    steps.push_back({Phase::Bwd, stage, mb, unit++});
  }
  for (int mb = microbatches - warmup; mb < microbatches; ++mb)
    steps.push_back({Phase::Bwd, stage, mb, unit++});
  return steps;
}

/// Megatron-LM's forward_backward_pipelining_with_interleaving: virtual
/// step k maps to a chunk and a micro-batch through groups of `stages`
/// micro-batches per chunk.
static std::vector<PipelineStep> interleaved(const PipelineOptions &options,
                                             int stage) {
  int stages = options.stages, vpp = options.vpp;
  int total = options.microbatches * vpp;
  int warmup =
      options.microbatches == stages
          ? total
          : std::min((stages - stage - 1) * 2 + (vpp - 1) * stages, total);
  int unit = 0;
  auto step = [&](int k, Phase phase) {
    int inGroup = k % (stages * vpp);
    int localChunk = inGroup / stages;
    if (phase == Phase::Bwd)
      localChunk = vpp - localChunk - 1;
    int microbatch = k / (stages * vpp) * stages + k % stages;
    return PipelineStep{phase, localChunk * stages + stage, microbatch, unit};
  };
  std::vector<PipelineStep> steps;
  for (int k = 0; k < warmup; ++k, ++unit)
    steps.push_back(step(k, Phase::Fwd));
  int remaining = total - warmup;
  for (int k = 0; k < remaining; ++k, ++unit) {
    steps.push_back(step(warmup + k, Phase::Fwd));
    steps.push_back(step(k, Phase::Bwd));
  }
  for (int k = remaining; k < total; ++k, ++unit)
    steps.push_back(step(k, Phase::Bwd));
  return steps;
}

std::vector<PipelineStep>
lethe::pipelineSchedule(const PipelineOptions &options, int stage) {
  if (options.kind == PipelineScheduleKind::OneFOneB)
    return oneFOneB(options, stage);
  return interleaved(options, stage);
}

std::string lethe::formatPipelineSteps(const std::vector<PipelineStep> &steps,
                                       const PipelineOptions &options) {
  std::string text;
  llvm::raw_string_ostream os(text);
  for (auto [index, step] : llvm::enumerate(steps)) {
    if (index)
      os << ' ';
    os << (step.phase == Phase::Fwd ? 'F' : 'B') << step.microbatch;
    if (options.vpp > 1)
      os << '.' << step.chunk / options.stages;
  }
  return text;
}

std::string lethe::checkPipelineCommunication(
    const std::vector<PipelineCommGroups> &stages) {
  int numStages = static_cast<int>(stages.size());
  // Messages per directed pair, in send order and in receive order; the
  // ordinal of every op on its pair.
  std::map<std::pair<int, int>, std::vector<int64_t>> sent, received;
  std::vector<std::vector<std::vector<size_t>>> ordinal(numStages);
  for (int stage = 0; stage < numStages; ++stage) {
    for (const std::vector<PipelineCommOp> &group : stages[stage]) {
      ordinal[stage].emplace_back();
      for (const PipelineCommOp &op : group) {
        if (op.peer < 0 || op.peer >= numStages || op.peer == stage)
          return "stage " + std::to_string(stage) +
                 " communicates with invalid peer " + std::to_string(op.peer);
        auto &list =
            op.send ? sent[{stage, op.peer}] : received[{op.peer, stage}];
        ordinal[stage].back().push_back(list.size());
        list.push_back(op.message);
      }
    }
  }
  for (int from = 0; from < numStages; ++from)
    for (int to = 0; to < numStages; ++to) {
      auto s = sent.find({from, to});
      auto r = received.find({from, to});
      std::vector<int64_t> none;
      const auto &sends = s == sent.end() ? none : s->second;
      const auto &recvs = r == received.end() ? none : r->second;
      if (sends != recvs)
        return "stage " + std::to_string(from) + " sends " +
               std::to_string(sends.size()) + " messages to stage " +
               std::to_string(to) + ", which receives " +
               std::to_string(recvs.size()) +
               (sends.size() == recvs.size() ? ", in another order" : "");
    }
  // Rendezvous run: (send?, from, to, ordinal) of the ops issued so far.
  std::set<std::tuple<bool, int, int, size_t>> issued;
  std::vector<size_t> at(numStages, 0);
  auto key = [](int stage, const PipelineCommOp &op, size_t k, bool partner) {
    int from = op.send ? stage : op.peer, to = op.send ? op.peer : stage;
    return std::make_tuple(partner ? !op.send : op.send, from, to, k);
  };
  auto issue = [&](int stage) {
    if (at[stage] >= stages[stage].size())
      return;
    for (auto [i, op] : llvm::enumerate(stages[stage][at[stage]]))
      issued.insert(key(stage, op, ordinal[stage][at[stage]][i], false));
  };
  for (int stage = 0; stage < numStages; ++stage)
    issue(stage);
  for (bool progress = true; progress;) {
    progress = false;
    for (int stage = 0; stage < numStages; ++stage) {
      if (at[stage] >= stages[stage].size())
        continue;
      bool complete = true;
      for (auto [i, op] : llvm::enumerate(stages[stage][at[stage]]))
        complete &= issued.count(
                        key(stage, op, ordinal[stage][at[stage]][i], true)) > 0;
      if (complete) {
        ++at[stage];
        issue(stage);
        progress = true;
      }
    }
  }
  for (int stage = 0; stage < numStages; ++stage)
    if (at[stage] < stages[stage].size())
      return "deadlock: stage " + std::to_string(stage) + " waits in group " +
             std::to_string(at[stage]);
  return "";
}
