//===- Files.h - Reading inputs and writing outputs safely ------*- C++ -*-===//
//
// Every tool and the C API read graphs and write their outputs through
// these: an input is a regular file (or stdin) of bounded size, so an
// endless one (/dev/zero, a FIFO) is refused instead of read until memory
// runs out; the outputs of a command are written to temporary files and
// renamed into place only once all of them are written, so a failed
// command leaves nothing behind.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_SUPPORT_FILES_H
#define LETHE_SUPPORT_FILES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lethe {

/// The largest input Lethe reads (1 GiB; real exported graphs are a few MB).
constexpr uint64_t kMaxInputBytes = uint64_t(1) << 30;

/// Reads `path` (`-`: stdin) whole. Refuses, with an error naming the file,
/// what is not a regular file (a directory, a device, a FIFO) and files
/// larger than `maxBytes`; stdin is read up to `maxBytes`.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readInputFile(llvm::StringRef path, uint64_t maxBytes = kMaxInputBytes);

/// Checks, without reading it, that `path` is a regular file of at most
/// `maxBytes` (`-` passes: stdin is bounded when it is read).
llvm::Error checkInputFile(llvm::StringRef path,
                           uint64_t maxBytes = kMaxInputBytes);

/// For tools whose main reads its own inputs (lethe-translate): checks the
/// positional arguments of `args` that name existing paths (all but the
/// values of the options `optionsWithValue`, e.g. "-o") as checkInputFile
/// does, and stdin when no path is given (a device that is not a terminal,
/// such as /dev/zero, is refused). Paths that do not exist are left to the
/// tool to report.
llvm::Error
checkInputArguments(llvm::ArrayRef<const char *> args,
                    llvm::ArrayRef<llvm::StringRef> optionsWithValue);

/// Whether a graph's text is JSON: its first character after white space
/// (and a UTF-8 byte-order mark) is `{`. MLIR text never starts so.
bool looksLikeJson(llvm::StringRef text);

/// The output files of one command. `add` writes each to a temporary file
/// beside its destination; `commit` renames them all into place. Without a
/// successful commit (an error, an early return) the temporaries are
/// removed and no destination is touched. `-` is stdout, written at commit,
/// as are destinations that are not regular files (`/dev/null`, a FIFO); a
/// link is written through, not replaced.
class OutputFiles {
public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles &) = delete;
  OutputFiles &operator=(const OutputFiles &) = delete;
  ~OutputFiles();

  /// Writes `path`'s content to its temporary. Errors name the file. With
  /// `json`, content that does not parse as JSON (a bare `inf` or `nan`) is
  /// an error instead: Lethe's JSON outputs are always JSON.
  llvm::Error add(llvm::StringRef path,
                  llvm::function_ref<void(llvm::raw_ostream &)> write,
                  bool json = false);
  /// Renames every temporary into place. If a rename fails, the files this
  /// commit already put in place are removed again.
  llvm::Error commit();

private:
  struct Pending {
    std::string path;
    /// The file `path` links to, when it is a link: what is replaced.
    std::string target;
    /// Written to at commit, from `text`: stdout, a device, a FIFO.
    bool direct = false;
    /// The temporary of the others.
    std::unique_ptr<llvm::sys::fs::TempFile> temp;
    /// The content of stdout.
    std::string text;
  };
  std::vector<Pending> pending;
};

} // namespace lethe

#endif // LETHE_SUPPORT_FILES_H
