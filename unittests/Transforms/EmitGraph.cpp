//===- EmitGraph.cpp - A TrainingGraph written as IR, for tests -----------===//

#include "EmitGraph.h"

#include "lethe/Dialect/Lethe/IR/LetheOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace lethe;

func::FuncOp lethe::testing::emitGraph(const TrainingGraph &graph,
                                       ModuleOp module) {
  OpBuilder builder(module.getBodyRegion());
  MLIRContext *context = module.getContext();
  Location loc = builder.getUnknownLoc();
  auto bytesType = [&](int64_t bytes) {
    return RankedTensorType::get({bytes}, builder.getIntegerType(8));
  };
  SmallVector<Type> inputs;
  for (const GraphValue &value : graph.getValues())
    if (value.isInput())
      inputs.push_back(bytesType(value.bytes));
  SmallVector<Type> outputs;
  std::vector<Type> typeOf(graph.numValues());
  for (auto [id, value] : llvm::enumerate(graph.getValues()))
    if (value.isInput())
      typeOf[id] = bytesType(value.bytes);
  auto func = func::FuncOp::create(builder, loc, "step",
                                   builder.getFunctionType(inputs, {}));
  Block *block = func.addEntryBlock();
  builder.setInsertionPointToEnd(block);
  std::vector<Value> irValue(graph.numValues());
  unsigned argument = 0;
  for (auto [id, value] : llvm::enumerate(graph.getValues()))
    if (value.isInput())
      irValue[id] = block->getArgument(argument++);
  for (const GraphNode &node : graph.getNodes()) {
    SmallVector<Value> operands;
    for (ValueId operand : node.operands)
      operands.push_back(irValue[operand]);
    SmallVector<Type> results;
    SmallVector<int64_t> aliases;
    bool anyAlias = false;
    for (ValueId result : node.results) {
      const GraphValue &value = graph.getValue(result);
      int64_t alias = -1;
      if (graph.isAlias(result))
        for (auto [index, operand] : llvm::enumerate(node.operands))
          if (graph.getValue(operand).storage == value.storage)
            alias = index;
      aliases.push_back(alias);
      anyAlias |= alias >= 0;
      Type type = alias >= 0 ? typeOf[node.operands[alias]]
                             : Type(bytesType(value.bytes));
      typeOf[result] = type;
      results.push_back(type);
    }
    auto op = NodeOp::create(
        builder, loc, results, builder.getStringAttr(node.kind),
        PhaseAttr::get(context, node.phase), operands,
        builder.getF64FloatAttr(node.timeUs),
        anyAlias ? builder.getDenseI64ArrayAttr(aliases) : DenseI64ArrayAttr(),
        node.scope.empty() ? StringAttr() : builder.getStringAttr(node.scope),
        StringAttr(), Attribute());
    // Ids that are not positions (descending, spaced): a reader taking one
    // for the other fails.
    int64_t position = &node - graph.getNodes().data();
    LetheDialect::NodeIdAttrHelper(context).setAttr(
        op, builder.getI64IntegerAttr(
                3 * (static_cast<int64_t>(graph.numNodes()) - position) + 7));
    for (auto [result, id] : llvm::zip(op.getResults(), node.results))
      irValue[id] = result;
  }
  SmallVector<Value> returned;
  for (ValueId output : graph.getOutputs()) {
    returned.push_back(irValue[output]);
    outputs.push_back(typeOf[output]);
  }
  func::ReturnOp::create(builder, loc, returned);
  func.setType(builder.getFunctionType(inputs, outputs));
  return func;
}
