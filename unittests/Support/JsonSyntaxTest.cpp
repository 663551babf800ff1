//===- JsonSyntaxTest.cpp - checkJsonSyntax against llvm::json::parse ----===//

#include "lethe/Support/JsonSyntax.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include "gtest/gtest.h"

#include <random>
#include <string>

using namespace lethe;

namespace {

bool accepts(llvm::StringRef text) {
  if (llvm::Error error = checkJsonSyntax(text)) {
    llvm::consumeError(std::move(error));
    return false;
  }
  return true;
}

TEST(JsonSyntaxTest, AcceptsJson) {
  for (llvm::StringRef text :
       {"0", "-0", "1.5e-3", "-12E+4", "true", "false", "null", "\"\"",
        "\"a\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\"", " [ ] ", "{}", "[[[]]]",
        "{\"a\": [1, {\"b\": null}], \"c\": \"\xc3\xa9\"}", "\n[1,2 ,3]\r\n"})
    EXPECT_TRUE(accepts(text)) << text.str();
}

TEST(JsonSyntaxTest, RefusesWhatIsNotJson) {
  // What a printf of a non-finite double gives first of all.
  for (llvm::StringRef text : {"",
                               " ",
                               "inf",
                               "nan",
                               "-inf",
                               "{\"step_us\": inf}",
                               "[1, nan]",
                               "01",
                               "1.",
                               ".5",
                               "1e",
                               "+1",
                               "[1,]",
                               "[,1]",
                               "{\"a\" 1}",
                               "{\"a\": 1,}",
                               "{1: 2}",
                               "[1] 2",
                               "[",
                               "]",
                               "{\"a\": [1}",
                               "\"abc",
                               "\"\\x\"",
                               "\"\\u12g4\"",
                               "\"a\tb\"",
                               "tru",
                               "nul",
                               "\"\xff\""})
    EXPECT_FALSE(accepts(text)) << text.str();
}

TEST(JsonSyntaxTest, NestingDeeperThanAnyStack) {
  std::string deep(1000000, '[');
  deep.append(1000000, ']');
  EXPECT_TRUE(accepts(deep));
  deep.pop_back();
  EXPECT_FALSE(accepts(deep));
}

/// On a printed document and on every one-byte change of it, the check
/// agrees with LLVM's parser (numbers aside where LLVM's is laxer).
TEST(JsonSyntaxTest, AgreesWithLlvmParserOnMutations) {
  llvm::json::Value doc = llvm::json::Object{
      {"values",
       llvm::json::Array{llvm::json::Object{{"id", 3},
                                            {"name", "n1 (aten.mm)"},
                                            {"bytes", 1048576},
                                            {"reason", "a \"quoted\" reason"}},
                         llvm::json::Object{{"ratio", -0.25},
                                            {"ok", true},
                                            {"none", nullptr},
                                            {"list", llvm::json::Array{}}}}},
      {"step_us", 1.5e6}};
  std::string text = llvm::formatv("{0:2}", doc).str();
  ASSERT_TRUE(accepts(text));
  const std::string alphabet = "{}[]\",:0123456789.-+eE \\tnfau\x01";
  std::mt19937 rng(7);
  int checked = 0;
  for (size_t at = 0; at < text.size(); ++at) {
    for (int k = 0; k < 4; ++k) {
      std::string mutated = text;
      char c = alphabet[rng() % alphabet.size()];
      if (k == 3)
        mutated.erase(at, 1);
      else
        mutated[at] = c;
      llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(mutated);
      bool llvmAccepts = static_cast<bool>(parsed);
      if (!parsed)
        llvm::consumeError(parsed.takeError());
      bool checkAccepts = accepts(mutated);
      // Never laxer than LLVM's parser. LLVM's reads a number as whatever
      // strtod takes of the characters [-+.eE0-9] ("1.", "01" pass), the
      // check follows RFC 8259: it may refuse more where the change is one
      // of those characters.
      llvm::StringRef numeric = "0123456789.-+eE";
      char changed = k == 3 ? text[at] : c;
      if (llvmAccepts && !checkAccepts && numeric.contains(changed))
        continue;
      EXPECT_EQ(checkAccepts, llvmAccepts) << mutated;
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000);
}

} // namespace
