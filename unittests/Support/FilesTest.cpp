//===- FilesTest.cpp - Bounded inputs and all-or-nothing outputs ----------===//

#include "lethe/Support/Files.h"
#include "lethe/Import/Diagnostics.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

using namespace lethe;

namespace {

/// A fresh directory, removed with its files at the end of the test.
class TempDir {
public:
  TempDir() {
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("lethe-files", path));
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<128> result(path);
    llvm::sys::path::append(result, name);
    return result.str().str();
  }
  /// The names of the files in the directory, sorted.
  std::vector<std::string> list() const {
    std::vector<std::string> names;
    std::error_code error;
    for (llvm::sys::fs::directory_iterator it(path, error), end;
         it != end && !error; it.increment(error))
      names.push_back(llvm::sys::path::filename(it->path()).str());
    llvm::sort(names);
    return names;
  }

private:
  llvm::SmallString<128> path;
};

void writeText(const std::string &path, llvm::StringRef text) {
  std::error_code error;
  llvm::raw_fd_ostream os(path, error);
  ASSERT_FALSE(error);
  os << text;
}

TEST(FilesTest, ReadInputFileBoundsSize) {
  TempDir dir;
  writeText(dir.file("graph.json"), "{\"nodes\": []}");
  auto buffer = readInputFile(dir.file("graph.json"));
  ASSERT_TRUE(static_cast<bool>(buffer));
  EXPECT_EQ((*buffer)->getBuffer(), "{\"nodes\": []}");
  auto tooLarge = readInputFile(dir.file("graph.json"), /*maxBytes=*/8);
  ASSERT_FALSE(static_cast<bool>(tooLarge));
  EXPECT_NE(llvm::toString(tooLarge.takeError())
                .find("is 13 bytes, over the limit of 8 bytes"),
            std::string::npos);
}

TEST(FilesTest, ReadInputFileRefusesNonRegularFiles) {
  TempDir dir;
  for (const std::string &path : {std::string("/dev/zero"), dir.file("")}) {
    auto buffer = readInputFile(path);
    ASSERT_FALSE(static_cast<bool>(buffer)) << path;
    EXPECT_NE(llvm::toString(buffer.takeError()).find("not a regular file"),
              std::string::npos);
  }
  auto missing = readInputFile(dir.file("missing.json"));
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("missing.json"),
            std::string::npos);
}

TEST(FilesTest, LooksLikeJson) {
  EXPECT_TRUE(looksLikeJson("{}"));
  EXPECT_TRUE(looksLikeJson(" \n\t{\"nodes\": []}"));
  EXPECT_TRUE(looksLikeJson("\xEF\xBB\xBF{}"));
  EXPECT_FALSE(looksLikeJson("func.func @step() { return }"));
  EXPECT_FALSE(looksLikeJson("#map = affine_map<(d0) -> (d0)>"));
  EXPECT_FALSE(looksLikeJson(""));
}

TEST(FilesTest, OutputsAppearOnlyAtCommit) {
  TempDir dir;
  {
    OutputFiles outputs;
    ASSERT_FALSE(static_cast<bool>(outputs.add(
        dir.file("a.json"), [](llvm::raw_ostream &os) { os << "{}"; },
        /*json=*/true)));
    ASSERT_FALSE(static_cast<bool>(outputs.add(
        dir.file("b.svg"), [](llvm::raw_ostream &os) { os << "<svg/>"; })));
    // Written to temporaries only.
    EXPECT_FALSE(llvm::sys::fs::exists(dir.file("a.json")));
    ASSERT_FALSE(static_cast<bool>(outputs.commit()));
  }
  EXPECT_EQ(dir.list(), (std::vector<std::string>{"a.json", "b.svg"}));
}

TEST(FilesTest, FailedOutputsLeaveNothing) {
  TempDir dir;
  writeText(dir.file("old.json"), "old");
  {
    OutputFiles outputs;
    ASSERT_FALSE(static_cast<bool>(outputs.add(
        dir.file("old.json"), [](llvm::raw_ostream &os) { os << "{}"; })));
    llvm::Error error = outputs.add(dir.file("missing/dir.json"),
                                    [](llvm::raw_ostream &os) { os << "{}"; });
    ASSERT_TRUE(static_cast<bool>(error));
    EXPECT_NE(llvm::toString(std::move(error)).find("missing/dir.json"),
              std::string::npos);
    // The command gives up: no commit.
  }
  EXPECT_EQ(dir.list(), std::vector<std::string>{"old.json"});
  auto old = readInputFile(dir.file("old.json"));
  ASSERT_TRUE(static_cast<bool>(old));
  EXPECT_EQ((*old)->getBuffer(), "old");
}

TEST(FilesTest, JsonOutputsMustParse) {
  TempDir dir;
  OutputFiles outputs;
  llvm::Error error = outputs.add(
      dir.file("bad.json"),
      [](llvm::raw_ostream &os) { os << "{\"step_us\": inf}"; },
      /*json=*/true);
  ASSERT_TRUE(static_cast<bool>(error));
  EXPECT_NE(llvm::toString(std::move(error)).find("not valid JSON"),
            std::string::npos);
  ASSERT_FALSE(static_cast<bool>(outputs.commit()));
  EXPECT_TRUE(dir.list().empty());
}

TEST(FilesTest, ExcerptShowsTheColumn) {
  std::string line(1000, 'a');
  line[500] = 'X';
  std::string text;
  llvm::raw_string_ostream os(text);
  printLineExcerpt(os, line, /*column=*/501);
  llvm::StringRef excerpt(text);
  auto [shown, caret] = excerpt.split('\n');
  EXPECT_TRUE(shown.starts_with("..."));
  EXPECT_TRUE(shown.ends_with("..."));
  EXPECT_EQ(shown.size(), kExcerptWidth + 6);
  // The caret is under the X.
  EXPECT_EQ(caret.find('^'), shown.find('X'));
  EXPECT_EQ(truncateText(std::string(1000, 'm'), 20),
            std::string(17, 'm') + "...");
}

} // namespace
