//===- JsonLocations.h - Where things are in a JSON text --------*- C++ -*-===//
//
// llvm::json parses to values without positions, so the importers find the
// file:line:col of what they report on here: a pre-parse depth check, a scan
// of the parsed text for where array elements start, and offset -> location.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_IMPORT_JSONLOCATIONS_H
#define LETHE_IMPORT_JSONLOCATIONS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lethe {

/// JSON nested deeper than this is refused before parsing (llvm::json
/// parses recursively; real graphs nest about 6 levels).
constexpr unsigned kMaxJsonNesting = 256;

/// The offset of the first bracket of `text` nested deeper than
/// kMaxJsonNesting, if any (brackets inside strings do not count).
std::optional<size_t> findExcessiveJsonNesting(llvm::StringRef text);

/// An array field of the top-level JSON object: the offsets of its brackets
/// and the [begin, end) byte range of each element's text.
struct JsonArraySpan {
  size_t open = 0, close = 0;
  std::vector<std::pair<size_t, size_t>> elements;
};

/// Finds the array fields `keys` of the top-level JSON object in `text`, one
/// span per key (none when the field is absent or, the last time it
/// appears, not an array), in one pass that skips values without validating
/// them. Returns false when the text around the elements of a found array
/// is not a comma and whitespace, so that parsing each element and the
/// text outside the array checks the whole document: a caller can parse a
/// large array one element at a time.
bool scanTopLevelArrays(
    llvm::StringRef text, llvm::ArrayRef<llvm::StringRef> keys,
    llvm::MutableArrayRef<std::optional<JsonArraySpan>> spans);

/// Where each element of the array fields `keys` of the top-level JSON
/// object in `text` starts: one list of byte offsets per key, empty when
/// there is none. One pass over `text`, which must have parsed: values are
/// skipped, not validated.
llvm::SmallVector<std::vector<size_t>, 2>
findTopLevelArrayElements(llvm::StringRef text,
                          llvm::ArrayRef<llvm::StringRef> keys);

/// The same for the one field `key`.
std::vector<size_t> findTopLevelArrayElements(llvm::StringRef text,
                                              llvm::StringRef key);

/// Maps byte offsets of `text`, the contents of `fileName`, to file:line:col
/// locations. The line starts are found once, on first use, so that each
/// further lookup is a binary search.
class TextLocator {
public:
  TextLocator(mlir::StringAttr fileName, llvm::StringRef text)
      : fileName(fileName), text(text) {}

  /// The location of byte `offset` (at most the end of the text).
  mlir::Location at(size_t offset);

private:
  mlir::StringAttr fileName;
  llvm::StringRef text;
  std::vector<size_t> lineStarts;
};

/// The file:line:col of byte `offset` of `text`, the contents of `fileName`
/// (one lookup; use TextLocator for many).
mlir::Location locationInText(mlir::MLIRContext *context,
                              llvm::StringRef fileName, llvm::StringRef text,
                              size_t offset);

/// Where llvm::json's parse error `message` ("[line:col, byte=N]: what")
/// points in `fileName`; `message` becomes the "what".
mlir::Location jsonParseErrorLocation(mlir::MLIRContext *context,
                                      llvm::StringRef fileName,
                                      std::string &message);

} // namespace lethe

#endif // LETHE_IMPORT_JSONLOCATIONS_H
