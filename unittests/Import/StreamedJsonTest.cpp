//===- StreamedJsonTest.cpp -----------------------------------------------===//
//
// A StreamedJsonDocument must accept exactly what json::parse accepts, give
// its error on what it refuses, and hand out the same elements: checked on
// random documents and on random byte-level mutations of them.
//
//===----------------------------------------------------------------------===//

#include "lethe/Import/StreamedJson.h"
#include "lethe/Import/JsonLocations.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"

#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

using namespace lethe;
namespace json = llvm::json;

namespace {

/// A random JSON value of bounded depth, with strings that hold brackets,
/// commas, quotes and escapes (what a splitter could trip on).
std::string randomValue(std::mt19937 &rng, int depth) {
  static const char *strings[] = {"\"a\"", "\"[\"", "\"]}\"", "\"\\\"x,\"",
                                  "\"\\\\\"", "\"\\u0065\"", "\"nodes\""};
  // Numbers on both sides of each of json::parse's rules (int64, uint64,
  // double, refused), read by the plain parser or handed back.
  static const char *scalars[] = {"0",
                                  "-1.5e3",
                                  "true",
                                  "false",
                                  "null",
                                  "007",
                                  "-0",
                                  "+1",
                                  "123456789012345678",
                                  "-999999999999999999",
                                  "9223372036854775807",
                                  "-9223372036854775808",
                                  "9223372036854775808",
                                  "18446744073709551616",
                                  "-9223372036854775809",
                                  "1.",
                                  ".5",
                                  "1e",
                                  "-"};
  std::uniform_int_distribution<int> kind(0, depth > 0 ? 4 : 1);
  switch (kind(rng)) {
  case 0:
    return strings[rng() % std::size(strings)];
  case 1:
    return scalars[rng() % std::size(scalars)];
  case 2:
  case 3: {
    bool object = kind(rng) % 2;
    std::string text = object ? "{" : "[ ";
    for (unsigned i = 0, n = rng() % 4; i < n; ++i) {
      if (i)
        text += rng() % 2 ? ", " : ",\n";
      // Now and then a repeated key: the last value, the first place.
      if (object)
        text += llvm::formatv("\"k{0}\": ", rng() % 8 ? i : 0).str();
      text += randomValue(rng, depth - 1);
    }
    return text + (object ? "}" : "]");
  }
  default:
    return "\"s\"";
  }
}

std::string randomDocument(std::mt19937 &rng) {
  std::string text = "{";
  if (rng() % 2)
    text += "\"model\": " + randomValue(rng, 2) + ", ";
  text += "\"nodes\": [";
  for (unsigned i = 0, n = rng() % 6; i < n; ++i)
    text += (i ? ", " : " ") + randomValue(rng, 3);
  text += "]";
  if (rng() % 2)
    text += ", \"saved\": " + randomValue(rng, 2);
  if (rng() % 4 == 0)
    text += ", \"nodes\": " + randomValue(rng, 2);
  return text + "}";
}

std::string mutate(std::string text, std::mt19937 &rng) {
  static const char *pieces[] = {",", "]", "[", "{", "}", "\"", ":", "\\",
                                 " ", "\xff", "1", "nul"};
  for (unsigned i = 0, n = 1 + rng() % 2; i < n && !text.empty(); ++i) {
    size_t at = rng() % text.size();
    switch (rng() % 3) {
    case 0:
      text.erase(at, 1 + rng() % 3);
      break;
    case 1:
      text.insert(at, pieces[rng() % std::size(pieces)]);
      break;
    default:
      text.resize(at);
    }
  }
  return text;
}

/// The same tree, objects' members in the same iteration order (what a
/// reader walking an object sees first), numbers of the same type.
void expectSameTree(const json::Value &a, const json::Value &b) {
  ASSERT_EQ(a.kind(), b.kind());
  if (a.kind() == json::Value::Number) {
    EXPECT_EQ(a.getAsInteger().has_value(), b.getAsInteger().has_value());
    EXPECT_EQ(a.getAsUINT64().has_value(), b.getAsUINT64().has_value());
    EXPECT_EQ(a, b);
    // A double reads as an integer where it is one: tell them apart by
    // json::parse's rule, an integer has no '.' or exponent when printed.
    EXPECT_EQ(llvm::formatv("{0}", a).str(), llvm::formatv("{0}", b).str());
  } else if (const json::Array *x = a.getAsArray()) {
    const json::Array *y = b.getAsArray();
    ASSERT_EQ(x->size(), y->size());
    for (auto [u, v] : llvm::zip_equal(*x, *y))
      expectSameTree(u, v);
  } else if (const json::Object *x = a.getAsObject()) {
    const json::Object *y = b.getAsObject();
    ASSERT_EQ(x->size(), y->size());
    for (auto [u, v] : llvm::zip_equal(*x, *y)) {
      EXPECT_EQ(u.first, v.first);
      expectSameTree(u.second, v.second);
    }
  } else {
    EXPECT_EQ(a, b);
  }
}

/// A FlatJsonValue answers each accessor the importer uses as the json
/// tree of the same text does, for its members and elements too: the keys
/// it has and keys it lacks, every scalar read as each kind.
void expectSameAnswers(const FlatJsonValue &flat, const json::Value &tree) {
  EXPECT_EQ(flat.kind(), tree.kind());
  EXPECT_EQ(flat.getAsString(), tree.getAsString());
  EXPECT_EQ(flat.getAsBoolean(), tree.getAsBoolean());
  EXPECT_EQ(flat.getAsInteger(), tree.getAsInteger());
  EXPECT_EQ(flat.getAsUINT64(), tree.getAsUINT64());
  std::optional<double> number = flat.getAsNumber();
  EXPECT_EQ(number.has_value(), tree.getAsNumber().has_value());
  if (number && tree.getAsNumber() && !std::isnan(*number))
    EXPECT_EQ(*number, *tree.getAsNumber());
  EXPECT_EQ(flat.getAsArray() != nullptr, tree.getAsArray() != nullptr);
  EXPECT_EQ(flat.getAsObject() != nullptr, tree.getAsObject() != nullptr);
  if (const json::Array *array = tree.getAsArray()) {
    ASSERT_EQ(flat.size(), array->size());
    for (size_t i = 0; i < array->size(); ++i)
      expectSameAnswers(flat[i], (*array)[i]);
  }
  if (const json::Object *object = tree.getAsObject()) {
    std::vector<std::string> keys = {"", "missing", "nodes", "a"};
    for (const auto &[key, value] : *object)
      keys.push_back(std::string(llvm::StringRef(key)));
    for (const std::string &key : keys) {
      SCOPED_TRACE(key);
      const json::Value *expected = object->get(key);
      const FlatJsonValue *found = flat.get(key);
      ASSERT_EQ(found != nullptr, expected != nullptr);
      if (expected)
        expectSameAnswers(*found, *expected);
      EXPECT_EQ(flat.getString(key), object->getString(key));
      EXPECT_EQ(flat.getInteger(key), object->getInteger(key));
      EXPECT_EQ(flat.getBoolean(key), object->getBoolean(key));
      EXPECT_EQ(flat.getArray(key) != nullptr,
                object->getArray(key) != nullptr);
      EXPECT_EQ(flat.getObject(key) != nullptr,
                object->getObject(key) != nullptr);
    }
  }
}

/// Parses `text` both ways: the same verdict, error and elements.
void expectSameAsWholeParse(const std::string &text) {
  SCOPED_TRACE(text);
  llvm::Expected<json::Value> whole = json::parse(text);
  std::string streamedError;
  std::vector<json::Value> elements;
  std::optional<json::Value> root;
  llvm::Expected<StreamedJsonDocument> document =
      StreamedJsonDocument::parse(text, "nodes");
  if (!document) {
    streamedError = llvm::toString(document.takeError());
  } else {
    if (llvm::Error error = document->forEachElement(
            [&](size_t index, std::optional<size_t>,
                const FlatJsonValue *plain, const json::Value *v) {
              EXPECT_EQ(index, elements.size());
              EXPECT_NE(plain == nullptr, v == nullptr);
              if (plain)
                expectSameAnswers(*plain, plain->toJson());
              elements.push_back(plain ? plain->toJson() : *v);
            }))
      streamedError = llvm::toString(std::move(error));
    else
      root = document->getRoot();
  }
  if (!whole) {
    EXPECT_EQ(streamedError, llvm::toString(whole.takeError()));
    return;
  }
  ASSERT_EQ(streamedError, "");
  const json::Object *object = whole->getAsObject();
  const json::Array *nodes = object ? object->getArray("nodes") : nullptr;
  EXPECT_EQ(document->hasArray(), nodes != nullptr);
  if (!nodes)
    return;
  EXPECT_EQ(document->arraySize(), nodes->size());
  EXPECT_EQ(json::Value(json::Array(elements)), json::Value(json::Array(*nodes)));
  for (auto [streamed, parsed] : llvm::zip_equal(elements, *nodes))
    expectSameTree(streamed, parsed);
  // The rest of the document is the same but for the streamed array.
  json::Object rest = *object;
  rest["nodes"] = json::Array(elements);
  json::Object streamedRoot = *root->getAsObject();
  streamedRoot["nodes"] = json::Array(elements);
  EXPECT_EQ(json::Value(std::move(rest)), json::Value(std::move(streamedRoot)));
}

TEST(StreamedJsonTest, AcceptsAndRefusesWhatOneParseDoes) {
  std::mt19937 rng(20);
  for (int i = 0; i < 3000; ++i) {
    std::string text = randomDocument(rng);
    expectSameAsWholeParse(text);
    expectSameAsWholeParse(mutate(text, rng));
  }
}

TEST(StreamedJsonTest, EdgeCases) {
  for (const char *text : {
           R"({"nodes": []})", R"({"nodes": [ ]})", R"({"nodes": [1,]})",
           R"({"nodes": [1 2]})", R"({"nodes": [,1]})", R"({"nodes": [1],})",
           R"({"nodes": [1], "nodes": 2})", R"({"nodes": 2, "nodes": [1]})",
           R"({"nod\u0065s": [1], "nodes": [2]})",
           R"({"nodes": [1], "nod\u0065s": [2]})", R"([1, 2])", R"({"nodes":)",
           R"({"nodes": ["]", "\"]"]})", "{\"nodes\": [\"\xff\"]}", "",
           R"({"nodes": [1]} x)", R"({"a": "\"nodes\": [1]", "nodes": [2]})"})
    expectSameAsWholeParse(text);
}

/// findExcessiveJsonNesting's meaning, one byte at a time: brackets outside
/// strings counted, a backslash in a string skipping the byte after it.
std::optional<size_t> excessiveNestingByBytes(llvm::StringRef text) {
  unsigned depth = 0;
  bool inString = false;
  for (size_t i = 0, e = text.size(); i < e; ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if ((c == '[' || c == '{') && ++depth > kMaxJsonNesting)
      return i;
    else if ((c == ']' || c == '}') && depth > 0)
      --depth;
  }
  return std::nullopt;
}

// The table-driven scan (strings skipped with memchr) finds what a reading
// byte by byte finds, on texts dense in brackets, quotes and backslashes
// (runs of them before a quote, a backslash at the very end) and near the
// nesting limit; line starts found with memchr give the same locations.
TEST(StreamedJsonTest, NestingAndLocationsAsByteByByte) {
  std::mt19937 rng(21);
  const char alphabet[] = {'[', '{', ']', '}', '"', '\\', 'a', ',', '\n'};
  mlir::MLIRContext context;
  auto file = mlir::StringAttr::get(&context, "f.json");
  int excessive = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string text;
    // Some texts open deep first, so that the limit is crossed.
    if (i % 4 == 0)
      text.append(kMaxJsonNesting - 2 + rng() % 5, '[');
    for (unsigned n = rng() % 64; n > 0; --n)
      text += alphabet[rng() % std::size(alphabet)];
    std::optional<size_t> expected = excessiveNestingByBytes(text);
    excessive += expected.has_value();
    EXPECT_EQ(findExcessiveJsonNesting(text), expected) << text;
    TextLocator locator(file, text);
    for (size_t offset = 0; offset <= text.size(); offset += 1 + rng() % 7) {
      size_t line = 1 + std::count(text.begin(), text.begin() + offset, '\n');
      size_t lineStart = text.rfind('\n', offset == 0 ? 0 : offset - 1);
      size_t column =
          offset + 1 - (lineStart == std::string::npos || offset == 0
                            ? 0
                            : lineStart + 1);
      auto loc = mlir::cast<mlir::FileLineColLoc>(locator.at(offset));
      EXPECT_EQ(loc.getLine(), line) << text << " @" << offset;
      EXPECT_EQ(loc.getColumn(), column) << text << " @" << offset;
    }
  }
  // Both outcomes were exercised.
  EXPECT_GT(excessive, 100);
  EXPECT_LT(excessive, 3900);
}

} // namespace
