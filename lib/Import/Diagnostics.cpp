//===- Diagnostics.cpp - Short, located error messages --------------------===//

#include "lethe/Import/Diagnostics.h"
#include "lethe/Support/Files.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/AsmParser/AsmParserState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

using namespace mlir;
using namespace lethe;

static bool isContinuationByte(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

std::string lethe::truncateText(StringRef text, size_t maxBytes) {
  if (text.size() <= maxBytes)
    return text.str();
  size_t end = maxBytes > 3 ? maxBytes - 3 : 0;
  while (end > 0 && isContinuationByte(text[end]))
    --end;
  return (text.take_front(end) + "...").str();
}

void lethe::printLineExcerpt(raw_ostream &os, StringRef line, unsigned column) {
  size_t at = std::min<size_t>(column > 0 ? column - 1 : 0, line.size());
  size_t begin = at > kExcerptWidth / 2 ? at - kExcerptWidth / 2 : 0;
  size_t end = std::min(line.size(), begin + kExcerptWidth);
  if (end - begin < kExcerptWidth)
    begin = end > kExcerptWidth ? end - kExcerptWidth : 0;
  // Whole UTF-8 characters only.
  while (begin < at && isContinuationByte(line[begin]))
    ++begin;
  while (end < line.size() && end > at && isContinuationByte(line[end]))
    --end;
  StringRef prefix = begin > 0 ? "..." : "";
  os << prefix;
  for (char c : line.slice(begin, end))
    os << (static_cast<unsigned char>(c) < 0x20 ? ' ' : c);
  os << (end < line.size() ? "..." : "") << "\n";
  // The caret counts characters, not bytes.
  size_t width = prefix.size();
  for (char c : line.slice(begin, at))
    width += !isContinuationByte(c);
  os.indent(width) << "^\n";
}

CompactDiagnosticHandler::CompactDiagnosticHandler(MLIRContext *context,
                                                   raw_ostream &os,
                                                   llvm::SourceMgr *sourceMgr)
    : ScopedDiagnosticHandler(context), os(os), sourceMgr(sourceMgr) {
  setHandler([this](Diagnostic &diag) {
    // A parser reports every use of an undefined value: one deleted line
    // can make hundreds of errors.
    if (diag.getSeverity() == DiagnosticSeverity::Error &&
        ++errors > kMaxErrors)
      return success();
    print(diag, kMaxMessageBytes, /*quoteLine=*/true);
    unsigned notes = 0;
    for (Diagnostic &note : diag.getNotes())
      if (++notes <= kMaxNotes)
        print(note, kMaxNoteBytes, /*quoteLine=*/false);
    if (notes > kMaxNotes)
      this->os << "note: " << notes - kMaxNotes << " more notes\n";
    return success();
  });
}

CompactDiagnosticHandler::~CompactDiagnosticHandler() {
  if (errors > kMaxErrors)
    os << "error: " << errors - kMaxErrors << " more errors not shown\n";
}

StringRef CompactDiagnosticHandler::getSource(StringRef file) {
  if (sourceMgr)
    for (unsigned i = 1, e = sourceMgr->getNumBuffers(); i <= e; ++i)
      if (sourceMgr->getMemoryBuffer(i)->getBufferIdentifier() == file)
        return sourceMgr->getMemoryBuffer(i)->getBuffer();
  auto [it, inserted] = files.try_emplace(file);
  if (inserted) {
    llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> buffer =
        readInputFile(file);
    if (buffer && file != "-")
      it->second = std::move(*buffer);
    else
      llvm::consumeError(buffer.takeError());
  }
  return it->second ? it->second->getBuffer() : StringRef();
}

FileLineColLoc lethe::firstFilePosition(Location loc) {
  FileLineColLoc position;
  loc->walk([&](Location inner) {
    if ((position = dyn_cast<FileLineColLoc>(inner)))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return position;
}

/// A module the parser made up around top-level ops is located at line 0:
/// errors about it (no training function, several) point at its first op.
static void locateImplicitModule(ModuleOp module) {
  auto loc = dyn_cast<FileLineColLoc>(module.getLoc());
  if (!loc || loc.getLine() != 0)
    return;
  Block *body = module.getBody();
  module->setLoc(body->empty()
                     ? Location(FileLineColLoc::get(loc.getFilename(), 1, 1))
                     : body->front().getLoc());
}

OwningOpRef<ModuleOp> lethe::parseLocatedModule(llvm::SourceMgr &sourceMgr,
                                                MLIRContext *context) {
  // Verified below, once every op has its position.
  ParserConfig config(context, /*verifyAfterParse=*/false);
  AsmParserState state;
  Block block;
  if (failed(parseAsmSourceFile(sourceMgr, &block, config, &state)))
    return {};
  StringAttr file = StringAttr::get(
      context, sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())
                   ->getBufferIdentifier());
  for (const AsmParserState::OperationDefinition &definition :
       state.getOpDefs()) {
    Operation *op = definition.op;
    if (firstFilePosition(op->getLoc()))
      continue;
    auto [line, column] = sourceMgr.getLineAndColumn(definition.loc.Start);
    Location position = FileLineColLoc::get(file, line, column);
    if (auto name = dyn_cast<NameLoc>(op->getLoc()))
      op->setLoc(NameLoc::get(name.getName(), position));
    else if (isa<UnknownLoc>(op->getLoc()))
      op->setLoc(position);
    else
      op->setLoc(FusedLoc::get(context, {op->getLoc(), position}));
  }
  OwningOpRef<ModuleOp> module =
      detail::constructContainerOpForParserIfNecessary<ModuleOp>(
          &block, context, FileLineColLoc::get(file, 0, 0));
  if (!module)
    return {};
  locateImplicitModule(*module);
  if (failed(verify(*module)))
    return {};
  return module;
}

void lethe::printFilePosition(raw_ostream &os, FileLineColLoc position) {
  if (position)
    os << position.getFilename().getValue() << ":" << position.getLine() << ":"
       << position.getColumn() << ": ";
}

void CompactDiagnosticHandler::print(Diagnostic &diag, size_t maxBytes,
                                     bool quoteLine) {
  FileLineColLoc position = firstFilePosition(diag.getLocation());
  printFilePosition(os, position);
  switch (diag.getSeverity()) {
  case DiagnosticSeverity::Error:
    os << "error: ";
    break;
  case DiagnosticSeverity::Warning:
    os << "warning: ";
    break;
  case DiagnosticSeverity::Note:
    os << "note: ";
    break;
  case DiagnosticSeverity::Remark:
    os << "remark: ";
    break;
  }
  os << truncateText(diag.str(), maxBytes) << "\n";
  if (!quoteLine || !position || position.getLine() == 0)
    return;
  StringRef source = getSource(position.getFilename().getValue());
  // Line `getLine()`, counted from 1.
  for (unsigned line = 1; line < position.getLine() && !source.empty();
       ++line) {
    size_t newline = source.find('\n');
    source = newline == StringRef::npos ? StringRef()
                                        : source.drop_front(newline + 1);
  }
  StringRef text = source.take_until([](char c) { return c == '\n'; });
  text.consume_back("\r");
  if (!text.trim().empty())
    printLineExcerpt(os, text, position.getColumn());
}
