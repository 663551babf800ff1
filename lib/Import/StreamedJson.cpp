//===- StreamedJson.cpp - A JSON document with one array read lazily ------===//
//
// Why the two-step check equals one parse: the scan checks that only commas
// and whitespace lie between the array's elements; the rest of the text is
// parsed with the array emptied, and each element on its own. Every byte is
// then parsed once, and a document whose parts all parse is JSON (an
// array of JSON values in place of an empty one, at a place the rest's
// parse found to be a value). When any part fails, the whole text is parsed
// for its error, so that the error is the first in the text, as before.
//
//===----------------------------------------------------------------------===//

#include "lethe/Import/StreamedJson.h"
#include "lethe/Import/JsonLocations.h"

#include <string>

using namespace lethe;
namespace json = llvm::json;

llvm::Error StreamedJsonDocument::wholeTextError() const {
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return parsed.takeError();
  // Unreachable by the argument at the top; a parse error all the same.
  return llvm::createStringError("[0:0, byte=0]: an element of '" + key +
                                 "' is not a JSON value");
}

llvm::Expected<StreamedJsonDocument>
StreamedJsonDocument::parse(llvm::StringRef text, llvm::StringRef key) {
  StreamedJsonDocument document(text, key);
  std::optional<JsonArraySpan> span;
  if (!scanTopLevelArrays(text, key, span))
    return document.wholeTextError();
  if (span) {
    std::string rest =
        (text.take_front(span->open + 1) + text.drop_front(span->close)).str();
    llvm::Expected<json::Value> parsed = json::parse(rest);
    if (!parsed) {
      llvm::consumeError(parsed.takeError());
      return document.wholeTextError();
    }
    // The array the scan emptied is the one the parse kept (the last of
    // that key, spelt without escapes): stream it. Otherwise parse whole.
    const json::Object *object = parsed->getAsObject();
    const json::Array *array = object ? object->getArray(key) : nullptr;
    if (array && array->empty()) {
      document.root = std::move(*parsed);
      document.elements = std::move(span->elements);
      document.streamed = true;
      return document;
    }
  }
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return parsed.takeError();
  document.root = std::move(*parsed);
  return document;
}

bool StreamedJsonDocument::hasArray() const {
  const json::Object *object = root.getAsObject();
  return object && object->getArray(key);
}

size_t StreamedJsonDocument::arraySize() const {
  if (streamed)
    return elements.size();
  const json::Object *object = root.getAsObject();
  const json::Array *array = object ? object->getArray(key) : nullptr;
  return array ? array->size() : 0;
}

llvm::Error StreamedJsonDocument::forEachElement(
    llvm::function_ref<void(size_t, std::optional<size_t>, const json::Value &)>
        fn) const {
  if (!streamed) {
    if (const json::Object *object = root.getAsObject())
      if (const json::Array *array = object->getArray(key))
        for (auto [index, value] : llvm::enumerate(*array))
          fn(index, std::nullopt, value);
    return llvm::Error::success();
  }
  for (auto [index, element] : llvm::enumerate(elements)) {
    auto [begin, end] = element;
    llvm::Expected<json::Value> value = json::parse(text.slice(begin, end));
    if (!value) {
      llvm::consumeError(value.takeError());
      return wholeTextError();
    }
    fn(index, begin, *value);
  }
  return llvm::Error::success();
}
