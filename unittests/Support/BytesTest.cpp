//===- BytesTest.cpp - Byte counts as people write them -------------------===//

#include "lethe/Support/Bytes.h"

#include "gtest/gtest.h"

using namespace lethe;

namespace {

int64_t parse(llvm::StringRef text, std::optional<int64_t> of = {}) {
  llvm::Expected<int64_t> value = parseByteCount(text, of);
  if (!value) {
    ADD_FAILURE() << llvm::toString(value.takeError());
    return -1;
  }
  return *value;
}

std::string error(llvm::StringRef text, std::optional<int64_t> of = {}) {
  llvm::Expected<int64_t> value = parseByteCount(text, of);
  if (value)
    return "no error";
  return llvm::toString(value.takeError());
}

TEST(BytesTest, Units) {
  EXPECT_EQ(parse("512"), 512);
  EXPECT_EQ(parse("512B"), 512);
  EXPECT_EQ(parse("4KiB"), 4096);
  EXPECT_EQ(parse("1.5 GiB"), 1536ll * 1024 * 1024);
  EXPECT_EQ(parse("800MB"), 800000000);
  EXPECT_EQ(parse("2gb"), 2000000000);
  EXPECT_EQ(parse("  3 mib "), 3 * 1024 * 1024);
}

TEST(BytesTest, Percent) {
  EXPECT_EQ(parse("50%", 1000), 500);
  EXPECT_EQ(parse("33.3%", 1000), 333);
  EXPECT_EQ(error("50%"),
            "invalid byte count '50%': a percentage needs a reference size");
}

TEST(BytesTest, Errors) {
  EXPECT_EQ(error("lots"), "invalid byte count 'lots': expected a number");
  EXPECT_EQ(error("1.2.3"), "invalid byte count '1.2.3': expected a number");
  EXPECT_EQ(error("4 parsecs"),
            "invalid byte count '4 parsecs': unknown unit 'parsecs' (use B, "
            "KiB, MiB, GiB, TiB, KB, MB, GB, TB or %)");
  EXPECT_EQ(error("99999999999TB"),
            "invalid byte count '99999999999TB': too large");
}

} // namespace
