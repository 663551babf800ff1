//===- LetheToRuntime.cpp - Allocated program -> EmitC runtime calls ------===//
//
// One sweep over the allocated program in issue order emits one runtime call
// per op, copy, record, wait and release (docs/Lowering.md). Every tensor
// gets a named slot constant (SlotLayout.cpp); NCCL groups of
// point-to-point transfers are issued together (P2PGroups.cpp).
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "lethe/Conversion/Passes.h"
#include "lethe/Dialect/Lethe/IR/LetheDialect.h"
#include "lethe/Dialect/Lethe/IR/LetheTypes.h"

#include "mlir/IR/Remarks.h"
#include "llvm/Support/Format.h"

namespace lethe {
#define GEN_PASS_DEF_LOWERTORUNTIME
#include "lethe/Conversion/Passes.h.inc"
} // namespace lethe

using namespace mlir;
using namespace lethe;
using namespace lethe::lowering;

namespace {

/// kMaxKernelBuffers of lib/Runtime/Kernels.h: buffers one replay takes.
constexpr unsigned kMaxReplayBuffers = 64;

/// A C string literal.
std::string quote(const Twine &twine) {
  std::string text = twine.str();
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out + "\"";
}

/// The op string of a runtime call: the node's kind and name.
std::string opLabel(StringRef kind, std::optional<StringRef> name) {
  if (!name)
    return quote(kind);
  return quote(kind + " " + *name);
}

/// Microseconds with nanosecond resolution, without trailing zeros.
std::string formatUs(double us) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%.3f", us);
  while (text.back() == '0')
    text.pop_back();
  if (text.back() == '.')
    text.push_back('0');
  return text;
}

StringRef streamEnum(Stream stream) {
  switch (stream) {
  case Stream::Compute:
    return "LETHE_STREAM_COMPUTE";
  case Stream::D2H:
    return "LETHE_STREAM_D2H";
  case Stream::H2D:
    return "LETHE_STREAM_H2D";
  case Stream::Comm:
    return "LETHE_STREAM_COMM";
  }
  llvm_unreachable("unknown stream");
}

/// The runtime dtype letheRtFill and the collectives take.
StringRef fillDType(Type type) {
  Type element = cast<ShapedType>(type).getElementType();
  if (element.isBF16())
    return "LETHE_DTYPE_BF16";
  if (element.isF16())
    return "LETHE_DTYPE_F16";
  if (element.isF32())
    return "LETHE_DTYPE_F32";
  return "LETHE_DTYPE_RAW";
}

} // namespace

std::string Lowering::ssa(Value value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  value.printAsOperand(os, asmState);
  return text;
}

std::string Lowering::describe(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(op->getResults(), os,
                        [&](Value result) { os << ssa(result); });
  if (op->getNumResults())
    os << " = ";
  if (auto node = dyn_cast<NodeOp>(op)) {
    os << node.getKind();
    if (std::optional<StringRef> name = node.getName())
      os << " \"" << *name << "\"";
    os << " " << stringifyPhase(node.getPhase());
    if (std::optional<StringRef> scope = node.getScope())
      os << " [" << *scope << "]";
  } else if (auto collective = dyn_cast<CollectiveOp>(op)) {
    os << CollectiveOp::getOperationName() << " "
       << stringifyCollectiveKind(collective.getKind());
    if (std::optional<StringRef> name = collective.getName())
      os << " \"" << *name << "\"";
    os << " " << stringifyPhase(collective.getPhase());
  } else {
    os << op->getName().getStringRef();
  }
  if (op->getNumOperands()) {
    os << " (";
    llvm::interleaveComma(op->getOperands(), os,
                          [&](Value operand) { os << ssa(operand); });
    os << ")";
  }
  return text;
}

// Emission helpers
//===----------------------------------------------------------------------===//

void Lowering::blankLine() {
  emitc::VerbatimOp::create(builder, builder.getUnknownLoc(), "");
}

void Lowering::comment(const Twine &text) {
  emitc::VerbatimOp::create(builder, builder.getUnknownLoc(),
                            ("// " + text).str());
}

void Lowering::call(Location loc, StringRef callee, ArrayRef<Attribute> args) {
  SmallVector<Attribute> all = {builder.getIndexAttr(0)};
  all.append(args.begin(), args.end());
  emitc::CallOpaqueOp::create(builder, loc, TypeRange(), callee, ValueRange{rt},
                              builder.getArrayAttr(all));
}

void Lowering::emitWaits(Location loc, Stream stream, ValueRange timepoints) {
  SmallVector<uint32_t> events;
  for (Value timepoint : timepoints)
    for (uint32_t event : eventsOf.lookup(timepoint))
      if (!llvm::is_contained(events, event))
        events.push_back(event);
  // A stream already ordered after an event (it recorded or awaited it)
  // needs no second wait.
  for (uint32_t event : events)
    if (ordered[static_cast<unsigned>(stream)].insert(event).second)
      call(loc, "letheRtWait",
           {opaque(streamEnum(stream)), builder.getI32IntegerAttr(event)});
}

void Lowering::emitRecord(Location loc, Stream stream, Value timepoint) {
  uint32_t event = numEvents++;
  eventsOf[timepoint] = {event};
  ordered[static_cast<unsigned>(stream)].insert(event);
  call(loc, "letheRtRecord",
       {opaque(streamEnum(stream)), builder.getI32IntegerAttr(event)});
}

/// The slot's name when the call touches all of it, else its first `bytes`.
std::string Lowering::bufExpr(const Slot &slot, int64_t bytes) const {
  if (bytes == slot.bytes)
    return slot.name;
  return "{" + slot.name + ".offset, " + std::to_string(bytes) + "}";
}

emitc::FuncOp Lowering::beginFunction(StringRef name) {
  MLIRContext *ctx = builder.getContext();
  blankLine();
  rtType = emitc::PointerType::get(emitc::OpaqueType::get(ctx, "LetheRt"));
  Type status = emitc::OpaqueType::get(ctx, "LetheRtStatus");
  auto fn = emitc::FuncOp::create(builder, func.getLoc(), name,
                                  builder.getFunctionType({rtType}, {status}));
  fn.setSpecifiersAttr(builder.getStrArrayAttr({"static"}));
  Block *entry = fn.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  // Generated code reads better with `rt` than with the emitter's `v1`.
  emitc::VerbatimOp::create(builder, func.getLoc(), "LetheRt *rt = {};",
                            entry->getArgument(0));
  rt = emitc::LiteralOp::create(builder, func.getLoc(), rtType, "rt");
  return fn;
}

void Lowering::endFunction() {
  Location loc = func.getLoc();
  Type status = emitc::OpaqueType::get(builder.getContext(), "LetheRtStatus");
  auto expr = emitc::ExpressionOp::create(builder, loc, status, ValueRange{rt});
  Block &body = expr.createBody();
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(&body);
    auto get = emitc::CallOpaqueOp::create(builder, loc, TypeRange{status},
                                           "letheRtGetStatus",
                                           ValueRange{body.getArgument(0)});
    emitc::YieldOp::create(builder, loc, get.getResult(0));
  }
  emitc::ReturnOp::create(builder, loc, expr.getResult());
  builder.setInsertionPointToEnd(module.getBody());
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

LogicalResult Lowering::lowerOp(Operation *op) {
  Location loc = op->getLoc();
  Stream stream = getOpStream(op);
  if (auto node = dyn_cast<NodeOp>(op))
    return lowerNode(node);
  if (isa<BarrierOp>(op)) {
    comment(describe(op) + " on " + stringifyStream(stream));
    emitRecord(loc, stream, op->getResult(0));
    return success();
  }
  if (auto join = dyn_cast<JoinOp>(op)) {
    SmallVector<uint32_t, 2> &events = eventsOf[join.getResult()];
    for (Value timepoint : join.getTimepoints())
      for (uint32_t event : eventsOf.lookup(timepoint))
        if (!llvm::is_contained(events, event))
          events.push_back(event);
    std::string list;
    llvm::raw_string_ostream os(list);
    llvm::interleaveComma(events, os);
    comment(describe(op) + ": events " + list);
    return success();
  }
  if (auto await = dyn_cast<AwaitOp>(op)) {
    comment(describe(op) + " on " + stringifyStream(stream));
    emitWaits(loc, stream, await.getTimepoints());
    return success();
  }
  if (isa<OffloadOp>(op))
    return lowerCopy(op, /*toHost=*/true);
  if (isa<PrefetchOp>(op))
    return lowerCopy(op, /*toHost=*/false);
  if (auto release = dyn_cast<ReleaseOp>(op))
    return lowerRelease(release);
  if (auto collective = dyn_cast<CollectiveOp>(op))
    return lowerCollective(collective);
  if (auto recompute = dyn_cast<RecomputeOp>(op)) {
    std::string results;
    llvm::raw_string_ostream os(results);
    llvm::interleaveComma(recompute.getResults(), os,
                          [&](Value result) { os << ssa(result); });
    comment("recompute " + results + ": re-runs " +
            Twine(recompute.getBody().front().getOperations().size() - 1) +
            " ops");
    return success();
  }
  if (isa<YieldOp>(op)) {
    comment("end of recompute");
    return success();
  }
  if (isa<func::ReturnOp>(op))
    return success();
  return op->emitError("lethe-lower-to-runtime: '")
         << op->getName() << "' has no runtime call";
}

LogicalResult Lowering::lowerNode(NodeOp node) {
  if (getOpStream(node) != Stream::Compute)
    return node.emitError("lethe-lower-to-runtime: ")
           << describe(node) << " is on the "
           << stringifyStream(getOpStream(node))
           << " stream; the runtime runs kernels on compute";
  std::optional<double> timeUs;
  if (FloatAttr time = node.getTimeUsAttr())
    timeUs = time.getValueAsDouble();
  if (!timeUs)
    return node.emitError("lethe-lower-to-runtime: ")
           << describe(node)
           << " has no time_us: run lethe-annotate-costs before lowering";
  computeUs += *timeUs;
  if (isGemmKind(node.getKind())) {
    std::string whyNot;
    if (std::optional<GemmMatch> gemm = matchGemm(node, whyNot))
      return lowerGemm(node, *gemm);
    // A missed GEMM: counted (num-gemm-fallbacks) and, with
    // --remarks-filter=lethe-lower-to-runtime, remarked with the reason.
    remark::missed(node.getLoc(), remark::RemarkOpts::name("gemm")
                                      .category(remarkCategory)
                                      .function(func.getSymName()))
        << "replayed, not a GEMM: " + whyNot;
    ++numFallbacks;
    comment(describe(node));
    comment("(replayed: " + whyNot + ")");
    return lowerReplay(node, *timeUs);
  }
  comment(describe(node));
  return lowerReplay(node, *timeUs);
}

LogicalResult Lowering::lowerGemm(NodeOp node, const GemmMatch &gemm) {
  auto operand = [&](const GemmOperand &o, std::string &text) -> LogicalResult {
    const Slot *slot = slotOf(o.view.storage);
    if (!slot)
      return node.emitError("lethe-lower-to-runtime: ")
             << ssa(o.value) << " has no storage in an arena";
    text = bufExpr(*slot, o.bytes);
    return success();
  };
  std::string a, b, c, bias = "{0, 0}";
  if (failed(operand(gemm.a, a)) || failed(operand(gemm.b, b)) ||
      failed(operand(gemm.c, c)) ||
      (gemm.bias && failed(operand(*gemm.bias, bias))))
    return failure();
  std::string shape;
  llvm::raw_string_ostream os(shape);
  os << "GEMM ";
  if (gemm.batch > 1)
    os << gemm.batch << " x ";
  os << gemm.m << "x" << gemm.k << (gemm.transA() ? "^T" : "") << " @ "
     << gemm.k << "x" << gemm.n << (gemm.transB() ? "^T" : "")
     << (gemm.bias ? " + bias" : "");
  comment(describe(node));
  comment(shape);
  std::string args;
  llvm::raw_string_ostream(args)
      << "{" << gemm.dtype << ", " << gemm.transA() << ", " << gemm.transB()
      << ", " << gemm.batch << ", " << gemm.m << ", " << gemm.n << ", "
      << gemm.k << ", " << a << ", " << b << ", " << bias << ", " << c << "}";
  call(node.getLoc(), "letheRtGemm",
       {opaque(opLabel(node.getKind(), node.getName())),
        opaque(formatUs(node.getTimeUsAttr().getValueAsDouble())),
        opaque(args)});
  ++numGemms;
  return success();
}

LogicalResult Lowering::lowerReplay(NodeOp node, double timeUs) {
  // Reads its tensor operands; writes its fresh results and the storages it
  // updates in place. An operand that is a view reads the view's bytes, not
  // its base's whole storage: a select of one row of a 100 MB tensor moves
  // kilobytes, and replaying it as 100 MB took Mamba's unplanned step 23%
  // over its op times on an H200. Where the view lies in its base is not
  // known here, so it is read from the storage's start (the traffic is the
  // op's; checksum mode hashes that part). A storage read through several
  // views is read once, as far as the largest.
  using Access = std::pair<const Slot *, int64_t>;
  SmallVector<Access> inputs, outputs;
  auto add = [](SmallVector<Access> &list, const Slot *slot, Type type) {
    int64_t bytes = std::min(slot->bytes, getTypeBytes(type));
    for (Access &a : list)
      if (a.first == slot) {
        a.second = std::max(a.second, bytes);
        return;
      }
    list.push_back({slot, bytes});
  };
  bool inPlace = isInPlaceWriter(node);
  bool isView = true;
  for (OpResult result : node->getResults()) {
    if (!isa<RankedTensorType>(result.getType()))
      continue;
    int64_t aliased = node.getAliasedOperand(result.getResultNumber());
    if (aliased >= 0 && !inPlace)
      continue;
    isView = false;
    const Slot *slot;
    if (failed(requireSlot(node, result, slot)))
      return failure();
    add(outputs, slot, result.getType());
  }
  if (isView && !replayViews) {
    comment("(a view: no kernel)");
    return success();
  }
  if (!isView)
    for (Value operand : node.getInputs()) {
      if (!isa<RankedTensorType>(operand.getType()))
        continue;
      const Slot *slot;
      if (failed(requireSlot(node, operand, slot)))
        return failure();
      add(inputs, slot, operand.getType());
    }
  // The runtime's kernels take at most kMaxReplayBuffers buffers: a longer
  // input list is read by a chain of replays, each also reading the outputs
  // of the one before, so the outputs still depend on every input.
  std::string op = opLabel(node.getKind(), node.getName());
  auto list = [&](ArrayRef<Access> accesses) {
    std::string text = "{";
    llvm::raw_string_ostream os(text);
    llvm::interleaveComma(accesses, os, [&](const Access &a) {
      os << bufExpr(*a.first, a.second);
    });
    return text + "}";
  };
  SmallVector<SmallVector<Access>> calls;
  if (inputs.size() + outputs.size() <= kMaxReplayBuffers) {
    calls.push_back(inputs);
  } else {
    int64_t chunk = (int64_t)kMaxReplayBuffers - 2 * (int64_t)outputs.size();
    if (chunk < 1)
      return node.emitError("lethe-lower-to-runtime: ")
             << describe(node) << " reads " << inputs.size() << " and writes "
             << outputs.size() << " buffers: too many for chained replays";
    for (size_t begin = 0; begin < inputs.size(); begin += chunk) {
      SmallVector<Access> reads;
      if (begin > 0)
        reads.append(outputs.begin(), outputs.end());
      reads.append(inputs.begin() + begin,
                   inputs.begin() + std::min(inputs.size(), begin + chunk));
      calls.push_back(std::move(reads));
    }
  }
  for (ArrayRef<Access> reads : calls)
    call(node.getLoc(), "letheRtReplay",
         {opaque(op), opaque(formatUs(timeUs / calls.size())),
          opaque(list(reads)), opaque(list(outputs))});
  ++numReplays;
  return success();
}

LogicalResult Lowering::lowerCopy(Operation *op, bool toHost) {
  Stream expected = toHost ? Stream::D2H : Stream::H2D;
  if (getOpStream(op) != expected)
    return op->emitError("lethe-lower-to-runtime: ")
           << describe(op) << " is on the " << stringifyStream(getOpStream(op))
           << " stream; the runtime copies "
           << (toHost ? "to the host on d2h" : "to the device on h2d");
  Value source = op->getOperand(0);
  Value await = op->getNumOperands() > 1 ? op->getOperand(1) : Value();
  const Slot *from, *to;
  if (failed(requireSlot(op, source, from)) ||
      failed(requireSlot(op, op->getResult(0), to)))
    return failure();
  int64_t bytes = getTypeBytes(op->getResult(0).getType());
  comment(describe(op) + ": " + std::to_string(bytes) + " bytes");
  if (await)
    emitWaits(op->getLoc(), expected, await);
  const Slot &device = toHost ? *from : *to;
  const Slot &host = toHost ? *to : *from;
  if (toHost)
    call(op->getLoc(), "letheRtCopyD2H",
         {opaque(device.name + ".offset"), opaque(host.name + ".offset"),
          opaque(std::to_string(bytes))});
  else
    call(op->getLoc(), "letheRtCopyH2D",
         {opaque(host.name + ".offset"), opaque(device.name + ".offset"),
          opaque(std::to_string(bytes))});
  emitRecord(op->getLoc(), expected, op->getResult(1));
  ++numCopies;
  return success();
}

LogicalResult Lowering::lowerRelease(ReleaseOp release) {
  Stream stream = getOpStream(release);
  comment(describe(release) + " on " + stringifyStream(stream));
  if (Value await = release.getAwaitTimepoint())
    emitWaits(release.getLoc(), stream, await);
  Value value = release.getValue();
  if (isa<BlockArgument>(program.getStorage(value)))
    return release.emitError("lethe-lower-to-runtime: ")
           << ssa(value) << " is a function argument: it cannot be released";
  const Slot *slot;
  if (failed(requireSlot(release, value, slot)))
    return failure();
  if (slot->host) {
    comment("(host slot " + slot->name + " is free: no call)");
    return success();
  }
  call(release.getLoc(), "letheRtRelease",
       {opaque(streamEnum(stream)), opaque(slot->name)});
  return success();
}

LogicalResult Lowering::lowerCollective(CollectiveOp collective) {
  if (collective.isPointToPoint())
    return lowerPointToPoint(collective);
  StringRef callee;
  switch (collective.getKind()) {
  case CollectiveKind::AllGather:
    callee = "letheRtAllGather";
    break;
  case CollectiveKind::ReduceScatter:
    callee = "letheRtReduceScatter";
    break;
  case CollectiveKind::AllReduce:
    callee = "letheRtAllReduce";
    break;
  default:
    return collective.emitError("lethe-lower-to-runtime: the runtime has no ")
           << stringifyCollectiveKind(collective.getKind()) << " collective";
  }
  if (failed(checkOnCommStream(collective, "collectives")))
    return failure();
  FailureOr<std::string> send = commBuffer(collective, collective.getInput());
  FailureOr<std::string> recv = commBuffer(collective, collective.getResult());
  if (failed(send) || failed(recv))
    return failure();
  comment(describe(collective) + " over " + std::to_string(worldSize) +
          " ranks");
  call(collective.getLoc(), callee,
       {opaque(opLabel(stringifyCollectiveKind(collective.getKind()),
                       collective.getName())),
        opaque(*send), opaque(*recv),
        opaque(fillDType(collective.getResult().getType()))});
  return success();
}

LogicalResult Lowering::checkOnCommStream(CollectiveOp collective,
                                          StringRef what) {
  if (getOpStream(collective) != Stream::Comm)
    return collective.emitError("lethe-lower-to-runtime: ")
           << describe(collective) << " is on the "
           << stringifyStream(getOpStream(collective))
           << " stream; the runtime runs " << what << " on comm";
  int32_t group = collective.getGroup().size();
  if (worldSize && worldSize != group)
    return collective.emitError("lethe-lower-to-runtime: a group of ")
           << group << " ranks, but an earlier collective spans " << worldSize;
  worldSize = group;
  return success();
}

FailureOr<std::string> Lowering::commBuffer(CollectiveOp collective,
                                            Value value) {
  // The tensor as the transfer sees it: a whole row-major prefix of its
  // storage.
  std::string why;
  std::optional<RowMajorView> view = getRowMajorView(value, why);
  if (!view || view->transposed)
    return collective.emitError("lethe-lower-to-runtime: ")
           << ssa(value) << " is not a row-major tensor"
           << (why.empty() ? "" : ": " + why);
  const Slot *slot;
  if (failed(requireSlot(collective, view->storage, slot)))
    return failure();
  return bufExpr(*slot, getTypeBytes(value.getType()));
}

LogicalResult Lowering::lowerPointToPoint(CollectiveOp collective) {
  bool isSend = collective.getKind() == CollectiveKind::Send;
  if (failed(checkOnCommStream(collective, "point-to-point transfers")))
    return failure();
  int64_t peer = *collective.getPeer();
  if (auto pipeline =
          LetheDialect::PipelineAttrHelper(func->getContext()).getAttr(func))
    if (pipeline.getStage() == peer)
      return collective.emitError("lethe-lower-to-runtime: ")
             << describe(collective) << " names its own stage " << peer
             << " as the peer";
  Value value = isSend ? collective.getInput() : collective.getResult();
  FailureOr<std::string> buffer = commBuffer(collective, value);
  if (failed(buffer))
    return failure();
  comment(describe(collective) + (isSend ? " to rank " : " from rank ") +
          std::to_string(peer));
  call(collective.getLoc(), isSend ? "letheRtSend" : "letheRtRecv",
       {opaque(opLabel(stringifyCollectiveKind(collective.getKind()),
                       collective.getName())),
        opaque(*buffer), opaque(fillDType(value.getType())),
        builder.getI32IntegerAttr(static_cast<int32_t>(peer))});
  return success();
}

// The program
//===----------------------------------------------------------------------===//

void Lowering::emitSlots() {
  MLIRContext *ctx = builder.getContext();
  Type bufType = emitc::OpaqueType::get(ctx, "LetheRtBuf");
  auto define = [&](const Slot &slot) {
    emitc::GlobalOp::create(builder, func.getLoc(), slot.name, bufType,
                            opaque("{" + std::to_string(slot.offset) + ", " +
                                   std::to_string(slot.bytes) + "}"),
                            /*extern_specifier=*/false,
                            /*static_specifier=*/true,
                            /*const_specifier=*/true);
  };
  comment("Planned device buffers {offset, bytes} (lethe-assign-buffers).");
  for (const Slot &slot : slots)
    if (!slot.host && !slot.resident)
      define(slot);
  blankLine();
  comment("Host slots (pinned arena) of offloaded tensors.");
  for (const Slot &slot : slots)
    if (slot.host)
      define(slot);
  blankLine();
  comment("Resident inputs (parameters, data, tangents), after the planned "
          "arena.");
  for (BlockArgument arg : func.getArguments())
    if (const Slot *slot = slotOf(arg))
      define(*slot);
}

void Lowering::emitInit() {
  beginFunction("init");
  comment("Parameters and inputs: the same contents whatever the plan.");
  for (BlockArgument arg : func.getArguments())
    if (const Slot *slot = slotOf(arg))
      call(func.getLoc(), "letheRtFill",
           {opaque(slot->name), opaque(fillDType(arg.getType())),
            opaque(std::to_string(arg.getArgNumber() + 1))});
  endFunction();
}

LogicalResult Lowering::emitStep() {
  beginFunction("step");
  // lethe-schedule chose copies that yield to collectives: the runtime
  // issues them in chunks, each waiting while a collective runs.
  if (auto chunk = LetheDialect::CopyChunkBytesAttrHelper(func->getContext())
                       .getAttr(func)) {
    if (chunk.getInt() < 65536)
      return func.emitError("lethe-lower-to-runtime: ")
             << LetheDialect::CopyChunkBytesAttrHelper::getNameStr() << " is "
             << chunk.getInt()
             << "; the runtime takes chunks of at least 65536 bytes";
    comment("Copies yield to collectives (lethe-schedule contention=yield), "
            "in chunks of " +
            std::to_string(chunk.getInt()) + " bytes.");
    call(func.getLoc(), "letheRtSetCopyYield",
         {opaque(std::to_string(chunk.getInt()))});
  }
  ArrayRef<Operation *> ops = program.getOps();
  llvm::DenseMap<int64_t, std::pair<size_t, size_t>> spans =
      findP2PGroupSpans(ops);
  for (size_t index = 0; index < ops.size(); ++index) {
    std::optional<int64_t> group = p2pGroupOf(ops[index]);
    auto span = group ? spans.find(*group) : spans.end();
    if (span != spans.end() && span->second.first == index) {
      if (failed(emitP2PGroup(ops, index, span->second.second, *group)))
        return failure();
      index = span->second.second;
      continue;
    }
    if (failed(lowerOp(ops[index])))
      return failure();
  }
  endFunction();
  return success();
}

void Lowering::emitChecksum() {
  beginFunction("checksum");
  comment("The step's outputs (loss, gradients) and the state it updates.");
  auto returnOp = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [index, output] : llvm::enumerate(returnOp.getOperands())) {
    const Slot *slot = slotOf(output);
    if (!slot || slot->host)
      continue;
    std::string name = "out" + std::to_string(index);
    if (auto node = output.getDefiningOp<NodeOp>())
      if (std::optional<StringRef> nodeName = node.getName())
        name += " " + nodeName->str();
    call(func.getLoc(), "letheRtChecksum",
         {opaque(quote(name)), opaque(slot->name)});
  }
  for (BlockArgument arg : func.getArguments()) {
    auto kind = func.getArgAttrOfType<StringAttr>(
        arg.getArgNumber(), LetheDialect::KindAttrHelper::getNameStr());
    if (const Slot *slot = slotOf(arg); slot && kind && kind == "buffer")
      call(func.getLoc(), "letheRtChecksum",
           {opaque(quote("state " + slot->name)), opaque(slot->name)});
  }
  endFunction();
}

void Lowering::emitProgram(StringRef name) {
  MLIRContext *ctx = builder.getContext();
  // The simulator's step time when the planner left it on the function
  // (lethe-plan's `lethe.plan`), else the compute stream's op times.
  double predicted = computeUs;
  std::string source = "the compute stream's op times";
  if (auto plan =
          LetheDialect::PlanAttrHelper(func->getContext()).getAttr(func)) {
    predicted = plan.getStepUs().convertToDouble();
    source = (LetheDialect::PlanAttrHelper::getNameStr() + " step_us").str();
    source += ", planned activation peak " +
              std::to_string(plan.getPeakBytes()) + " bytes";
  } else if (auto attr =
                 LetheDialect::PredictedStepUsAttrHelper(module->getContext())
                     .getAttr(module)) {
    predicted = attr.getValueAsDouble();
    source = LetheDialect::PredictedStepUsAttrHelper::getNameStr();
  }
  blankLine();
  comment("Planned step: " + formatUs(predicted) + " us (" + source + ").");
  std::string init;
  llvm::raw_string_ostream os(init);
  os << "{LETHE_RT_ABI_VERSION, " << quote(name) << ", " << deviceArenaBytes
     << ", " << hostArenaBytes << ", " << numEvents << ", " << worldSize << ", "
     << formatUs(predicted) << ", " << deviceArenaBytes
     << ", init, step, checksum}";
  comment("abiVersion, name, device arena, host arena, events, world size, "
          "planned step us, planned peak bytes, init, step, checksum.");
  emitc::GlobalOp::create(builder, func.getLoc(), "program",
                          emitc::OpaqueType::get(ctx, "LetheRtProgram"),
                          opaque(init), false, true, true);
  Type result = emitc::PointerType::get(
      emitc::OpaqueType::get(ctx, "const LetheRtProgram"));
  auto fn = emitc::FuncOp::create(builder, func.getLoc(), "letheProgram",
                                  builder.getFunctionType({}, {result}));
  fn.setSpecifiersAttr(builder.getStrArrayAttr({"extern \"C\""}));
  builder.setInsertionPointToStart(fn.addEntryBlock());
  Value address =
      emitc::LiteralOp::create(builder, func.getLoc(), result, "&program");
  emitc::ReturnOp::create(builder, func.getLoc(), address);
  builder.setInsertionPointToEnd(module.getBody());
}

LogicalResult Lowering::run(StringRef name) {
  if (failed(assignSlots()))
    return failure();
  builder.setInsertionPointToEnd(module.getBody());
  comment("Generated by lethe-lower-to-runtime from '" + name +
          "'. Do not edit.");
  comment("Device arena: " + std::to_string(plannedArenaBytes) +
          " planned bytes, then " + std::to_string(residentBytes) +
          " bytes of resident inputs; host arena: " +
          std::to_string(hostArenaBytes) + " bytes.");
  emitc::IncludeOp::create(builder, func.getLoc(), "lethe-c/Runtime.h");
  blankLine();
  emitSlots();
  emitInit();
  if (failed(emitStep()))
    return failure();
  emitChecksum();
  emitProgram(name);
  return success();
}

namespace {

struct LowerToRuntimePass
    : public lethe::impl::LowerToRuntimeBase<LowerToRuntimePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        funcs.push_back(func);
    if (funcs.size() != 1) {
      module.emitError("lethe-lower-to-runtime: a program is one function; "
                       "the module has ")
          << funcs.size();
      return signalPassFailure();
    }
    func::FuncOp func = funcs.front();
    FailureOr<ExplicitProgram> program = ExplicitProgram::build(func);
    if (failed(program))
      return signalPassFailure();

    std::string name = programName;
    if (name.empty()) {
      if (auto model = LetheDialect::ModelAttrHelper(module->getContext())
                           .getAttr(module))
        name = model.getValue().str();
      else
        name = func.getSymName().str();
    }
    Lowering lowering(module, func, *program, replayViews, getArgument());
    if (failed(lowering.run(name)))
      return signalPassFailure();
    numGemms = lowering.numGemms;
    numReplays = lowering.numReplays;
    numGemmFallbacks = lowering.numFallbacks;
    numCopies = lowering.numCopies;
    numEvents = lowering.numEvents;
    // The module now holds only the generated program.
    for (Operation &op : llvm::make_early_inc_range(module.getOps()))
      if (op.getName().getDialectNamespace() !=
          emitc::EmitCDialect::getDialectNamespace())
        op.erase();
  }
};

} // namespace
