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

/// A JSON value read from plain text (what an exporter writes: ASCII, no
/// escapes, nesting of at most 64) without building llvm::json's tree, whose
/// objects are hash maps of at least 64 buckets (~4 KB each): reading a node
/// into that tree and freeing it was half the import of a 100,000-node
/// graph. Strings are views of the text; an array's or object's members lie
/// flat in the FlatJsonReader that read it, valid until its next read.
///
/// It answers the accessors of json::Value, json::Object and json::Array the
/// importer uses as they answer for the same text (an object is its own
/// json::Object, an array its own json::Array; a repeated key's value is its
/// last one), so that one template reads either (lib/Import/JsonImporter.cpp).
class FlatJsonValue {
public:
  using Kind = llvm::json::Value::Kind;
  Kind kind() const { return kindOf; }

  const FlatJsonValue *getAsObject() const {
    return kindOf == Kind::Object ? this : nullptr;
  }
  const FlatJsonValue *getAsArray() const {
    return kindOf == Kind::Array ? this : nullptr;
  }
  std::optional<llvm::StringRef> getAsString() const {
    if (kindOf == Kind::String)
      return string;
    return std::nullopt;
  }
  std::optional<bool> getAsBoolean() const {
    if (kindOf == Kind::Boolean)
      return boolean;
    return std::nullopt;
  }
  // A number is held as the json::Value json::parse makes of it, which
  // answers for it.
  std::optional<double> getAsNumber() const {
    return kindOf == Kind::Number ? number->getAsNumber() : std::nullopt;
  }
  std::optional<int64_t> getAsInteger() const {
    return kindOf == Kind::Number ? number->getAsInteger() : std::nullopt;
  }
  std::optional<uint64_t> getAsUINT64() const {
    return kindOf == Kind::Number ? number->getAsUINT64() : std::nullopt;
  }

  /// An array's elements or an object's members (values), in text order.
  size_t size() const { return count; }
  const FlatJsonValue *begin() const { return members; }
  const FlatJsonValue *end() const { return members + count; }
  const FlatJsonValue &operator[](size_t index) const {
    return members[index];
  }

  /// An object's member `key` (its last, as json::Object keeps), or null.
  const FlatJsonValue *get(llvm::StringRef key) const;
  std::optional<llvm::StringRef> getString(llvm::StringRef key) const {
    const FlatJsonValue *value = get(key);
    return value ? value->getAsString() : std::nullopt;
  }
  std::optional<int64_t> getInteger(llvm::StringRef key) const {
    const FlatJsonValue *value = get(key);
    return value ? value->getAsInteger() : std::nullopt;
  }
  std::optional<bool> getBoolean(llvm::StringRef key) const {
    const FlatJsonValue *value = get(key);
    return value ? value->getAsBoolean() : std::nullopt;
  }
  const FlatJsonValue *getArray(llvm::StringRef key) const {
    const FlatJsonValue *value = get(key);
    return value ? value->getAsArray() : nullptr;
  }
  const FlatJsonValue *getObject(llvm::StringRef key) const {
    const FlatJsonValue *value = get(key);
    return value ? value->getAsObject() : nullptr;
  }

  /// The json::Value json::parse gives for the same text (members inserted
  /// in text order), with strings that are views of the text.
  llvm::json::Value toJson() const;

private:
  friend class FlatJsonReader;
  // Plain data, moved as bytes while the reader shuffles its members (a
  // json::Value member cost a call to move and one to destroy each time).
  Kind kindOf = Kind::Null;
  bool boolean = false;
  /// A Number: the reader's json::Value of it (its index while it reads).
  const llvm::json::Value *number = nullptr;
  /// A String's text; a member of an object: its key.
  llvm::StringRef string, key;
  /// Array or Object: its members, [first, first + count) of the reader's
  /// values while it reads (a Number: `first` is its index in the reader's
  /// numbers).
  const FlatJsonValue *members = nullptr;
  uint32_t first = 0, count = 0;
};

/// Reads plain JSON text into FlatJsonValue, reusing its storage from one
/// read to the next.
class FlatJsonReader {
public:
  /// The value of `text`, or null where it is not plain JSON as defined
  /// above or not JSON (json::parse must then read it, for its value or its
  /// error). What it accepts, json::parse accepts with the same value.
  const FlatJsonValue *read(llvm::StringRef text);

private:
  bool parseValue(FlatJsonValue &out, unsigned depth);
  template <typename Item> bool parseItems(char close, Item item);
  bool parseString(llvm::StringRef &out);
  bool parseNumber(llvm::json::Value &out);
  bool literal(llvm::StringRef word);
  void eatWhitespace();
  /// Moves the members of the compound whose first member is stack[mark]
  /// to `values`, recording where they are in `out`.
  void close(FlatJsonValue &out, size_t mark);

  const char *p = nullptr, *end = nullptr;
  FlatJsonValue root;
  /// Finished members, each compound's contiguous.
  std::vector<FlatJsonValue> values;
  /// Members of the compounds being read, innermost last.
  std::vector<FlatJsonValue> stack;
  /// The numbers read, each built once in place.
  std::vector<llvm::json::Value> numbers;
};

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

  /// Calls `fn(index, offset, plain, value)` for each element of the array,
  /// in order, with where its text starts (none when the array could not be
  /// streamed and was parsed with the rest: offsets are then unknown) and
  /// its value: `plain` where its text is plain (FlatJsonValue, valid until
  /// `fn` returns), else `value`; the other is null. An element that is not
  /// JSON stops the walk with the whole text's error. An element's strings
  /// and keys may be views of the text: a copy of it must not outlive the
  /// text.
  llvm::Error forEachElement(
      llvm::function_ref<void(size_t, std::optional<size_t>,
                              const FlatJsonValue *, const llvm::json::Value *)>
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
