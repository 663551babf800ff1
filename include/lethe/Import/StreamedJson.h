//===- StreamedJson.h - JSON with one array read lazily ---------*- C++ -*-===//
//
// llvm::json's tree of a document is many times its text (an exported graph
// of 100,000 nodes: about 2 GB for 25 MB). A StreamedJsonDocument parses the
// document with one large top-level array left empty, and hands out that
// array's elements one at a time, each parsed on its own and freed after
// use. What it accepts and the error it gives on bad text are exactly those
// of json::parse on the whole text.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_IMPORT_STREAMEDJSON_H
#define LETHE_IMPORT_STREAMEDJSON_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <vector>

namespace lethe {

class StreamedJsonDocument {
public:
  /// Parses `text` but the elements of its top-level array field `key`. The
  /// error is json::parse(text)'s ("[line:col, byte=N]: what"), here or from
  /// forEachElement: text is checked in two steps.
  static llvm::Expected<StreamedJsonDocument> parse(llvm::StringRef text,
                                                    llvm::StringRef key);

  /// The top-level value. When the array is streamed, its `key` field is an
  /// empty array.
  const llvm::json::Value &getRoot() const { return root; }

  /// Whether the top-level value is an object whose `key` is an array.
  bool hasArray() const;
  /// The number of elements of that array.
  size_t arraySize() const;

  /// Calls `fn(index, offset, value)` for each element of the array, in
  /// order, with where its text starts (none when the array could not be
  /// streamed and was parsed with the rest: offsets are then unknown). An
  /// element that is not JSON stops the walk with the whole text's error.
  /// An element's strings and keys may be views of the text: a copy of it
  /// must not outlive the text.
  llvm::Error
  forEachElement(llvm::function_ref<void(size_t, std::optional<size_t>,
                                         const llvm::json::Value &)>
                     fn) const;

private:
  StreamedJsonDocument(llvm::StringRef text, llvm::StringRef key)
      : text(text), key(key) {}
  /// json::parse(text)'s error: the first in the text, as one parse gives.
  llvm::Error wholeTextError() const;

  llvm::StringRef text, key;
  llvm::json::Value root = nullptr;
  /// The [begin, end) of each streamed element; empty when not streamed.
  std::vector<std::pair<size_t, size_t>> elements;
  bool streamed = false;
};

} // namespace lethe

#endif // LETHE_IMPORT_STREAMEDJSON_H
