//===- Diagnostics.h - Short, located error messages ------------*- C++ -*-===//
//
// Exported graphs are often one line of hundreds of kilobytes, so quoting
// "the source line" of an error, as MLIR's SourceMgrDiagnosticHandler does,
// can print a megabyte. `lethe` and `lethe-translate` print diagnostics
// through CompactDiagnosticHandler instead: `file:line:col: error: message`
// (the message capped), then at most kExcerptWidth characters of the line
// around the column and a caret; at most kMaxNotes short notes follow. An
// error with its notes stays under 1 KB (for paths of ordinary length).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_IMPORT_DIAGNOSTICS_H
#define LETHE_IMPORT_DIAGNOSTICS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace lethe {

/// Characters of a source line shown around an error's column.
constexpr size_t kExcerptWidth = 100;
/// Longest message printed; longer ones end in "...".
constexpr size_t kMaxMessageBytes = 400;
/// Notes printed with an error (message capped at kMaxNoteBytes, no line
/// quoted); the rest are counted.
constexpr unsigned kMaxNotes = 1;
constexpr size_t kMaxNoteBytes = 150;
/// Longest node name printed for a diagnostic located by name only.
constexpr size_t kMaxNameBytes = 100;

/// `text` cut to at most `maxBytes` bytes (on a UTF-8 character boundary),
/// ending in "..." when cut.
std::string truncateText(llvm::StringRef text, size_t maxBytes);

/// The first file position in `loc` (a node's NameLoc wraps one), null
/// when it has none.
mlir::FileLineColLoc firstFilePosition(mlir::Location loc);

/// A module the parser made up around top-level ops is located at line 0
/// (printed `file:0:0`): errors about it point at its first op instead (line
/// 1 of an empty file).
void locateImplicitModule(mlir::ModuleOp module);

/// Prints "file:line:col: " of `position`; nothing when it is null.
void printFilePosition(llvm::raw_ostream &os, mlir::FileLineColLoc position);

/// Prints `line` from about kExcerptWidth/2 characters before `column`
/// (1-based) to as many after, "..." where cut, and a caret under the
/// column on the next line.
void printLineExcerpt(llvm::raw_ostream &os, llvm::StringRef line,
                      unsigned column);

/// Prints every diagnostic of `context` compactly (see the file comment) to
/// `os` while alive. Source lines come from `sourceMgr`'s buffers when it
/// has one of the location's file name, else from the file itself (read
/// through readInputFile, so never a device or a huge file).
class CompactDiagnosticHandler : public mlir::ScopedDiagnosticHandler {
public:
  CompactDiagnosticHandler(mlir::MLIRContext *context, llvm::raw_ostream &os,
                           llvm::SourceMgr *sourceMgr = nullptr);

private:
  void print(mlir::Diagnostic &diag, size_t maxBytes, bool quoteLine);
  /// The text of `file`, or an empty string when it cannot be read.
  llvm::StringRef getSource(llvm::StringRef file);

  llvm::raw_ostream &os;
  llvm::SourceMgr *sourceMgr;
  llvm::StringMap<std::unique_ptr<llvm::MemoryBuffer>> files;
};

} // namespace lethe

#endif // LETHE_IMPORT_DIAGNOSTICS_H
