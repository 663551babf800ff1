//===- Diagnostics.h - Short, located error messages ------------*- C++ -*-===//
//
// Exported graphs are often one line of hundreds of kilobytes, so quoting
// "the source line" of an error, as MLIR's SourceMgrDiagnosticHandler does,
// can print a megabyte. `lethe` and `lethe-translate` print diagnostics
// through CompactDiagnosticHandler instead: `file:line:col: error: message`
// (the message capped), then at most kExcerptWidth characters of the line
// around the column and a caret; at most kMaxNotes short notes follow. An
// error with its notes stays under 1 KB (for paths of ordinary length); the
// first kMaxErrors errors are printed, the others only counted.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_IMPORT_DIAGNOSTICS_H
#define LETHE_IMPORT_DIAGNOSTICS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/OwningOpRef.h"
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
/// Errors printed; the rest are counted, and the count printed last.
constexpr unsigned kMaxErrors = 3;

/// `text` cut to at most `maxBytes` bytes (on a UTF-8 character boundary),
/// ending in "..." when cut.
std::string truncateText(llvm::StringRef text, size_t maxBytes);

/// The first file position in `loc` (a node's NameLoc wraps one), null
/// when it has none.
mlir::FileLineColLoc firstFilePosition(mlir::Location loc);

/// Parses the MLIR text of `sourceMgr`'s main buffer into a module (made up
/// around top-level ops, as parseSourceFile does) and verifies it, with
/// every op located in the file: an op the text locates as `loc(unknown)`
/// or by a name alone (exports do) gets the position it was parsed at, so
/// that errors about it, the verifier's included, say where it is. A module
/// made up around top-level ops is located at its first op (line 1 of an
/// empty file), not at line 0.
mlir::OwningOpRef<mlir::ModuleOp>
parseLocatedModule(llvm::SourceMgr &sourceMgr, mlir::MLIRContext *context);

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
  ~CompactDiagnosticHandler();

private:
  void print(mlir::Diagnostic &diag, size_t maxBytes, bool quoteLine);
  /// The text of `file`, or an empty string when it cannot be read.
  llvm::StringRef getSource(llvm::StringRef file);

  llvm::raw_ostream &os;
  llvm::SourceMgr *sourceMgr;
  llvm::StringMap<std::unique_ptr<llvm::MemoryBuffer>> files;
  unsigned errors = 0;
};

} // namespace lethe

#endif // LETHE_IMPORT_DIAGNOSTICS_H
