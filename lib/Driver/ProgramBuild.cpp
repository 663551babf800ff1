//===- ProgramBuild.cpp - `lethe compile --build` --------------------------===//
//
// Builds a compiled program's C++ into the shared library lethe-run loads,
// the way the runtime's own tests build generated programs
// (docs/Runtime.md, "The program format"): the host C++ compiler and the
// runtime header alone; the runtime's symbols resolve in lethe-run.
//
//===----------------------------------------------------------------------===//

#include "lethe/Driver/Commands.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace lethe;

#ifndef LETHE_SOURCE_INCLUDE_DIR
#define LETHE_SOURCE_INCLUDE_DIR ""
#endif

/// The directories searched for lethe-c/Runtime.h: $LETHE_INCLUDE_DIR, the
/// install beside the lethe binary (<prefix>/include), the source tree the
/// binary was built from.
static std::vector<std::string> headerDirs() {
  std::vector<std::string> dirs;
  if (std::optional<std::string> env =
          llvm::sys::Process::GetEnv("LETHE_INCLUDE_DIR"))
    dirs.push_back(*env);
  static int anchor;
  std::string exe = llvm::sys::fs::getMainExecutable(nullptr, &anchor);
  if (!exe.empty()) {
    llvm::SmallString<256> dir(llvm::sys::path::parent_path(
        llvm::sys::path::parent_path(exe)));
    llvm::sys::path::append(dir, "include");
    dirs.push_back(dir.str().str());
  }
  if (llvm::StringRef(LETHE_SOURCE_INCLUDE_DIR).size())
    dirs.push_back(LETHE_SOURCE_INCLUDE_DIR);
  return dirs;
}

/// $CXX, else the first of c++, clang++, g++ on the PATH; an error says
/// which was missing.
static llvm::Expected<std::string> findCompiler() {
  if (std::optional<std::string> env = llvm::sys::Process::GetEnv("CXX");
      env && !env->empty()) {
    if (llvm::StringRef(*env).contains('/')) {
      if (llvm::sys::fs::can_execute(*env))
        return *env;
    } else if (llvm::ErrorOr<std::string> found =
                   llvm::sys::findProgramByName(*env)) {
      return *found;
    }
    return llvm::createStringError("$CXX is '" + *env +
                                   "', which is no program that can be run");
  }
  for (llvm::StringRef name : {"c++", "clang++", "g++"})
    if (llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName(name))
      return *found;
  return llvm::createStringError(
      "no C++ compiler found ($CXX unset, and no c++, clang++ or g++ on the "
      "PATH)");
}

llvm::LogicalResult lethe::buildProgramLibrary(llvm::StringRef cppPath,
                                               llvm::StringRef libraryPath) {
  std::string includeDir;
  std::vector<std::string> searched = headerDirs();
  for (const std::string &dir : searched) {
    llvm::SmallString<256> header(dir);
    llvm::sys::path::append(header, "lethe-c", "Runtime.h");
    if (llvm::sys::fs::exists(header)) {
      includeDir = dir;
      break;
    }
  }
  if (includeDir.empty()) {
    llvm::errs() << "error: lethe compile --build: cannot find the runtime "
                    "header lethe-c/Runtime.h (searched";
    for (const std::string &dir : searched)
      llvm::errs() << " " << dir;
    llvm::errs() << "; set LETHE_INCLUDE_DIR)\n";
    return llvm::failure();
  }
  llvm::Expected<std::string> compiler = findCompiler();
  if (!compiler) {
    llvm::errs() << "error: lethe compile --build: "
                 << llvm::toString(compiler.takeError()) << "\n";
    return llvm::failure();
  }
  // Into a temporary renamed into place, so that a failed build leaves no
  // library behind.
  std::string temporary = (libraryPath + ".tmp").str();
  std::string include = "-I" + includeDir;
  llvm::SmallVector<llvm::StringRef> args = {
      *compiler, "-std=c++17", "-O1",        "-shared", "-fPIC",
      include,   cppPath,      "-o",         temporary};
  std::string message;
  int status = llvm::sys::ExecuteAndWait(*compiler, args, std::nullopt, {}, 0,
                                         0, &message);
  if (status != 0) {
    llvm::sys::fs::remove(temporary);
    llvm::errs() << "error: lethe compile --build: " << *compiler << " "
                 << (status < 0 ? "could not run: " + message
                                : "failed (exit " + std::to_string(status) +
                                      ")")
                 << " building " << libraryPath << " from " << cppPath << "\n";
    return llvm::failure();
  }
  if (std::error_code error = llvm::sys::fs::rename(temporary, libraryPath)) {
    llvm::sys::fs::remove(temporary);
    llvm::errs() << "error: cannot write '" << libraryPath
                 << "': " << error.message() << "\n";
    return llvm::failure();
  }
  return llvm::success();
}
