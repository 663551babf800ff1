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

#include "llvm/ADT/SmallString.h"

#include <cerrno>
#include <cstdlib>
#include <string>

using namespace lethe;
namespace json = llvm::json;

/// FlatJsonReader: strings and keys are views of the text (json::parse
/// allocates every key), short integers are read without strtoll (numbers
/// follow json::parse's rules, parseNumber), and it gives up (null) on what
/// is not plain: a byte outside ASCII, an escape, a syntax error, or a
/// nesting deeper than kMaxDepth (deeper values go to json::parse, whose
/// recursion the importer bounds beforehand, findExcessiveJsonNesting).
static constexpr unsigned kMaxDepth = 64;

const FlatJsonValue *FlatJsonValue::get(llvm::StringRef name) const {
  if (kindOf != Kind::Object)
    return nullptr;
  for (const FlatJsonValue *member = end(); member != begin();)
    if ((--member)->key == name)
      return member;
  return nullptr;
}

json::Value FlatJsonValue::toJson() const {
  switch (kindOf) {
  case Kind::String:
    return string;
  case Kind::Array: {
    json::Array array;
    array.reserve(count);
    for (const FlatJsonValue &element : *this)
      array.push_back(element.toJson());
    return array;
  }
  case Kind::Object: {
    // As json::parse inserts: a repeated key keeps its first place and
    // takes the last value.
    json::Object object;
    for (const FlatJsonValue &member : *this)
      object[json::ObjectKey(member.key)] = member.toJson();
    return object;
  }
  case Kind::Boolean:
    return boolean;
  case Kind::Number:
    return *number;
  case Kind::Null:
    return nullptr;
  }
  llvm_unreachable("unknown JSON kind");
}

void FlatJsonReader::eatWhitespace() {
  while (p != end && (*p == ' ' || *p == '\r' || *p == '\n' || *p == '\t'))
    ++p;
}

bool FlatJsonReader::literal(llvm::StringRef word) {
  if (static_cast<size_t>(end - p) < word.size() ||
      llvm::StringRef(p, word.size()) != word)
    return false;
  p += word.size();
  return true;
}

static bool isNumberChar(char c) {
  return (c >= '0' && c <= '9') || c == 'e' || c == 'E' || c == '+' ||
         c == '-' || c == '.';
}

/// A string without escapes, control characters or non-ASCII bytes, as a
/// view; the opening quote is consumed.
bool FlatJsonReader::parseString(llvm::StringRef &out) {
  const char *begin = p;
  while (p != end) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"') {
      out = llvm::StringRef(begin, p - begin);
      ++p;
      return true;
    }
    if (c == '\\' || c < 0x20 || c >= 0x80)
      return false;
    ++p;
  }
  return false;
}

/// json::parse's rule: the longest run of number characters, as an int64 if
/// strtoll reads it whole, else a uint64 if strtoull does (not after '-'),
/// else a double if strtod does.
bool FlatJsonReader::parseNumber(json::Value &out) {
  const char *begin = p;
  while (p != end && isNumberChar(*p))
    ++p;
  llvm::StringRef number(begin, p - begin);
  // Up to 18 digits, optionally negative: strtoll's value, computed.
  llvm::StringRef digits = number;
  bool negative = digits.consume_front("-");
  if (!digits.empty() && digits.size() <= 18 &&
      llvm::all_of(digits, [](char c) { return c >= '0' && c <= '9'; })) {
    int64_t value = 0;
    for (char c : digits)
      value = value * 10 + (c - '0');
    out = negative ? -value : value;
    return true;
  }
  llvm::SmallString<24> text(number);
  const char *textEnd = text.c_str() + text.size();
  char *stop;
  errno = 0;
  long long asInt = std::strtoll(text.c_str(), &stop, 10);
  if (stop == textEnd && errno != ERANGE) {
    out = static_cast<int64_t>(asInt);
    return true;
  }
  if (number.front() != '-') {
    errno = 0;
    unsigned long long asUnsigned = std::strtoull(text.c_str(), &stop, 10);
    if (stop == textEnd && errno != ERANGE) {
      out = static_cast<uint64_t>(asUnsigned);
      return true;
    }
  }
  out = std::strtod(text.c_str(), &stop);
  return stop == textEnd;
}

/// The items of an array or object after its opening bracket, each read by
/// `item`, separated by commas, up to `close`.
template <typename Item> bool FlatJsonReader::parseItems(char close, Item item) {
  eatWhitespace();
  if (p != end && *p == close) {
    ++p;
    return true;
  }
  while (true) {
    if (!item())
      return false;
    eatWhitespace();
    if (p == end)
      return false;
    char c = *p++;
    if (c == close)
      return true;
    if (c != ',')
      return false;
  }
}

void FlatJsonReader::close(FlatJsonValue &out, size_t mark) {
  out.first = static_cast<uint32_t>(values.size());
  out.count = static_cast<uint32_t>(stack.size() - mark);
  values.insert(values.end(), std::make_move_iterator(stack.begin() + mark),
                std::make_move_iterator(stack.end()));
  stack.resize(mark);
}

bool FlatJsonReader::parseValue(FlatJsonValue &out, unsigned depth) {
  eatWhitespace();
  if (p == end || depth > kMaxDepth)
    return false;
  switch (*p) {
  case 'n':
    out.kindOf = FlatJsonValue::Kind::Null;
    return literal("null");
  case 't':
    out.kindOf = FlatJsonValue::Kind::Boolean;
    out.boolean = true;
    return literal("true");
  case 'f':
    out.kindOf = FlatJsonValue::Kind::Boolean;
    out.boolean = false;
    return literal("false");
  case '"':
    ++p;
    out.kindOf = FlatJsonValue::Kind::String;
    return parseString(out.string);
  case '[': {
    ++p;
    out.kindOf = FlatJsonValue::Kind::Array;
    // Members are read into locals and pushed when done: reading one
    // pushes its own members, which may move the stack.
    size_t mark = stack.size();
    if (!parseItems(']', [&] {
          FlatJsonValue element;
          if (!parseValue(element, depth + 1))
            return false;
          stack.push_back(std::move(element));
          return true;
        }))
      return false;
    close(out, mark);
    return true;
  }
  case '{': {
    ++p;
    out.kindOf = FlatJsonValue::Kind::Object;
    size_t mark = stack.size();
    if (!parseItems('}', [&] {
          eatWhitespace();
          if (p == end || *p != '"')
            return false;
          ++p;
          llvm::StringRef key;
          if (!parseString(key))
            return false;
          eatWhitespace();
          if (p == end || *p != ':')
            return false;
          ++p;
          FlatJsonValue member;
          if (!parseValue(member, depth + 1))
            return false;
          member.key = key;
          stack.push_back(std::move(member));
          return true;
        }))
      return false;
    close(out, mark);
    return true;
  }
  default:
    if (!isNumberChar(*p))
      return false;
    out.kindOf = FlatJsonValue::Kind::Number;
    out.first = static_cast<uint32_t>(numbers.size());
    return parseNumber(numbers.emplace_back(nullptr));
  }
}

const FlatJsonValue *FlatJsonReader::read(llvm::StringRef text) {
  p = text.begin();
  end = text.end();
  values.clear();
  stack.clear();
  numbers.clear();
  root = FlatJsonValue();
  if (!parseValue(root, 0))
    return nullptr;
  eatWhitespace();
  if (p != end)
    return nullptr;
  // Members and numbers have their places now that nothing grows.
  auto place = [&](FlatJsonValue &value) {
    if (value.kindOf == FlatJsonValue::Kind::Number)
      value.number = &numbers[value.first];
    else
      value.members = values.data() + value.first;
  };
  for (FlatJsonValue &value : values)
    place(value);
  place(root);
  return &root;
}

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
    llvm::function_ref<void(size_t, std::optional<size_t>,
                            const FlatJsonValue *, const json::Value *)>
        fn) const {
  if (!streamed) {
    if (const json::Object *object = root.getAsObject())
      if (const json::Array *array = object->getArray(key))
        for (auto [index, value] : llvm::enumerate(*array))
          fn(index, std::nullopt, nullptr, &value);
    return llvm::Error::success();
  }
  FlatJsonReader reader;
  for (auto [index, element] : llvm::enumerate(elements)) {
    auto [begin, end] = element;
    llvm::StringRef elementText = text.slice(begin, end);
    if (const FlatJsonValue *plain = reader.read(elementText)) {
      fn(index, begin, plain, nullptr);
      continue;
    }
    llvm::Expected<json::Value> value = json::parse(elementText);
    if (!value) {
      llvm::consumeError(value.takeError());
      return wholeTextError();
    }
    fn(index, begin, nullptr, &*value);
  }
  return llvm::Error::success();
}
