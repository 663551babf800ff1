//===- PipelinePartition.h - A step split into pipeline chunks --*- C++ -*-===//
//
// The analysis behind lethe-expand-pipeline-schedule: which chunk (virtual
// stage) runs each op of a single-micro-batch step split by layer, which
// values each (phase, chunk) step sends to other stages, and where every
// stage receives and sends them in its schedule's order. The pass writes one
// stage's program from it; docs/Parallel.md states the rules.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_ANALYSIS_PIPELINEPARTITION_H
#define LETHE_ANALYSIS_PIPELINEPARTITION_H

#include "lethe/Analysis/PipelineSchedule.h"
#include "lethe/Dialect/Lethe/IR/LetheAttrs.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace lethe {

class PipelinePartition {
public:
  struct OpInfo {
    mlir::Operation *op = nullptr;
    Phase phase = Phase::Fwd;
    /// Layer (block) ordinal from the scope, or -1.
    int block = -1;
    /// The chunk (virtual stage) that runs the op.
    int chunk = 0;
    /// A forward op that depends on no layer's output and draws no random
    /// numbers (masks, position ids): re-run on every stage that needs it
    /// rather than sent.
    bool replicable = false;
    /// Depends on a layer's forward / backward output (program order).
    bool afterFwdBlocks = false;
    bool afterBwdBlocks = false;
    /// A sum of gradients from two stages that the step returns (tied
    /// weights): each stage sums its part over the micro-batches, and the
    /// sum of the parts is taken once, after the last micro-batch.
    bool deferred = false;
    double weight = 0.0;
  };

  /// A partial gradient sent once after the last micro-batch.
  struct DeferredTransfer {
    mlir::Value value;
    int from, to;
  };

  /// The values one step (phase, chunk) sends to one stage, per micro-batch.
  struct MessageTemplate {
    Phase phase;
    int chunk;
    int destination;
    llvm::SmallVector<mlir::Value> values;
    /// The (phase, chunk) steps of the destination that read one of them.
    llvm::SmallVector<std::pair<Phase, int>> readers;
  };

  /// Where a stage's point-to-point ops go: before unit u, receive; after
  /// unit u, send. Entries are (template index, micro-batch).
  struct StagePlan {
    std::vector<PipelineStep> steps;
    std::vector<llvm::SmallVector<std::pair<int, int>>> receivesBefore;
    std::vector<llvm::SmallVector<std::pair<int, int>>> sendsAfter;
  };

  /// Classifies the ops of `func` (the canonical graph form: one block
  /// ending in func.return), splits its layers into options.stages x
  /// options.vpp contiguous chunks of balanced work, places every op and
  /// collects the messages between stages. Emits an error and fails where
  /// the step cannot be split so.
  static mlir::FailureOr<PipelinePartition>
  build(mlir::func::FuncOp func, const PipelineOptions &options);

  /// Every stage's transfers, checked to be ordered consistently between
  /// all stages (else an error at `func`, and failure).
  mlir::FailureOr<llvm::SmallVector<StagePlan>>
  planTransfers(mlir::func::FuncOp func) const;

  int stageOf(int chunk) const { return chunk % options.stages; }
  int numChunks() const { return options.stages * options.vpp; }

  PipelineOptions options;
  llvm::SmallVector<OpInfo> ops;
  llvm::DenseMap<mlir::Operation *, unsigned> infoIndex;
  /// The layers, in forward order.
  llvm::SmallVector<std::string> blockNames;
  /// First block of each chunk, and one past the last chunk's last block.
  llvm::SmallVector<int> chunkStart;
  /// The ops each (phase, chunk) step runs, as indices into `ops`.
  std::map<std::pair<int, int>, llvm::SmallVector<unsigned>> opsOfStep;
  llvm::SmallVector<MessageTemplate> messages;
  llvm::SmallVector<DeferredTransfer> deferredTransfers;

private:
  mlir::LogicalResult classify(mlir::func::FuncOp func);
  mlir::LogicalResult partition(mlir::func::FuncOp func);
  void assignChunks();
  void deferCrossStageSums(mlir::func::ReturnOp ret);
  void collectMessages(mlir::func::ReturnOp ret);
  void planSends(StagePlan &plan, int stage) const;
  void planReceives(StagePlan &plan, int stage,
                    llvm::ArrayRef<StagePlan> senders) const;
};

} // namespace lethe

#endif // LETHE_ANALYSIS_PIPELINEPARTITION_H
