//===- Files.cpp - Reading inputs and writing outputs safely --------------===//

#include "lethe/Support/Files.h"
#include "lethe/Support/JsonSyntax.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <optional>

using namespace llvm;
using namespace lethe;

static Error fileError(StringRef path, const Twine &message) {
  return createStringError(inconvertibleErrorCode(),
                           "'" + path + "': " + message);
}

static std::string describeType(sys::fs::file_type type) {
  switch (type) {
  case sys::fs::file_type::directory_file:
    return "a directory";
  case sys::fs::file_type::fifo_file:
    return "a FIFO";
  case sys::fs::file_type::character_file:
  case sys::fs::file_type::block_file:
    return "a device";
  case sys::fs::file_type::socket_file:
    return "a socket";
  default:
    return "not a regular file";
  }
}

/// Checks the status of an input: a regular file of at most `maxBytes`.
static Error checkStatus(StringRef path, const sys::fs::file_status &status,
                         uint64_t maxBytes) {
  if (status.type() != sys::fs::file_type::regular_file)
    return fileError(path, "is " + describeType(status.type()) +
                               ", not a regular file");
  if (status.getSize() > maxBytes)
    return fileError(path, "is " + Twine(status.getSize()) +
                               " bytes, over the limit of " + Twine(maxBytes) +
                               " bytes");
  return Error::success();
}

Error lethe::checkInputFile(StringRef path, uint64_t maxBytes) {
  if (path == "-")
    return Error::success();
  sys::fs::file_status status;
  // By path, not through an open descriptor: opening a FIFO blocks.
  if (std::error_code error = sys::fs::status(path, status))
    return fileError(path, "cannot open: " + error.message());
  return checkStatus(path, status, maxBytes);
}

Expected<std::unique_ptr<MemoryBuffer>>
lethe::readInputFile(StringRef path, uint64_t maxBytes) {
  if (path == "-") {
    // stdin may be endless: read at most one byte past the limit.
    SmallString<0> text;
    sys::fs::file_t in = sys::fs::getStdinHandle();
    char chunk[1 << 16];
    while (true) {
      Expected<size_t> read = sys::fs::readNativeFile(in, chunk);
      if (!read)
        return fileError("<stdin>",
                         "cannot read: " + toString(read.takeError()));
      if (*read == 0)
        break;
      text.append(chunk, chunk + *read);
      if (text.size() > maxBytes)
        return fileError("<stdin>",
                         "is over the limit of " + Twine(maxBytes) + " bytes");
    }
    return MemoryBuffer::getMemBufferCopy(text, "<stdin>");
  }
  if (Error error = checkInputFile(path, maxBytes))
    return std::move(error);
  Expected<sys::fs::file_t> file = sys::fs::openNativeFileForRead(path);
  if (!file)
    return fileError(path, "cannot open: " + toString(file.takeError()));
  scope_exit closeFile([&] { sys::fs::closeFile(*file); });
  // Again through the descriptor: the path may have changed meanwhile.
  sys::fs::file_status status;
  if (std::error_code error = sys::fs::status(*file, status))
    return fileError(path, "cannot open: " + error.message());
  if (Error error = checkStatus(path, status, maxBytes))
    return std::move(error);
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
      MemoryBuffer::getOpenFile(*file, path, status.getSize());
  if (!buffer)
    return fileError(path, "cannot read: " + buffer.getError().message());
  return std::move(*buffer);
}

Error lethe::checkInputArguments(ArrayRef<const char *> args,
                                 ArrayRef<StringRef> optionsWithValue) {
  bool sawInput = false, positionalOnly = false;
  for (size_t i = 0; i < args.size(); ++i) {
    StringRef arg = args[i];
    if (!positionalOnly && arg == "--") {
      positionalOnly = true;
      continue;
    }
    if (!positionalOnly && arg.starts_with("-") && arg != "-") {
      if (is_contained(optionsWithValue, arg))
        ++i;
      continue;
    }
    if (arg == "-")
      continue;
    sawInput = true;
    if (!sys::fs::exists(arg))
      continue;
    if (Error error = checkInputFile(arg))
      return error;
  }
  if (sawInput)
    return Error::success();
  // stdin: a pipe or a file is fine, a device that is not a terminal
  // (/dev/zero) never ends.
  sys::fs::file_status status;
  if (!sys::fs::status(sys::fs::getStdinHandle(), status) &&
      (status.type() == sys::fs::file_type::character_file ||
       status.type() == sys::fs::file_type::block_file) &&
      !sys::Process::StandardInIsUserInput())
    return fileError("<stdin>", "is a device, not a regular file");
  return Error::success();
}

bool lethe::looksLikeJson(StringRef text) {
  text.consume_front("\xEF\xBB\xBF");
  text = text.ltrim(" \t\r\n");
  return text.starts_with("{");
}

OutputFiles::~OutputFiles() {
  for (Pending &file : pending)
    if (file.temp)
      consumeError(file.temp->discard());
}

Error OutputFiles::add(StringRef path, function_ref<void(raw_ostream &)> write,
                       bool json) {
  Pending file;
  file.path = path.str();
  // Renaming onto a destination replaces it: a link would become a file,
  // and `--json /dev/null` would replace the device. So a link is written
  // through (its target is replaced), and what is not a regular file (a
  // device, a FIFO) is written to, at commit, as it is.
  file.direct = path == "-";
  sys::fs::file_status status;
  if (!file.direct && !sys::fs::status(path, status)) {
    if (status.type() == sys::fs::file_type::directory_file)
      return fileError(path, "cannot write: is a directory");
    file.direct = status.type() != sys::fs::file_type::regular_file;
    SmallString<256> target;
    if (!file.direct && sys::fs::is_symlink_file(path) &&
        !sys::fs::real_path(path, target))
      file.target = std::string(target);
  }
  if (file.direct || json) {
    // Buffered: unbuffered, each of the writer's many small writes appended
    // to the string on its own (~1.5% of a `lethe plan --json` at 100,000
    // ops).
    raw_string_ostream os(file.text);
    os.SetBufferSize(1 << 16);
    write(os);
    os.flush();
  }
  if (json)
    if (Error invalid = checkJsonSyntax(file.text))
      return fileError(path, "internal error: the output is not valid JSON (" +
                                 toString(std::move(invalid)) +
                                 "); nothing was written");
  if (file.direct) {
    pending.push_back(std::move(file));
    return Error::success();
  }
  // Beside the destination, so that the rename stays on one file system.
  StringRef destination = file.target.empty() ? path : StringRef(file.target);
  Expected<sys::fs::TempFile> temp =
      sys::fs::TempFile::create(destination + ".tmp-%%%%%%");
  if (!temp)
    return fileError(path, "cannot write: " + toString(temp.takeError()));
  file.temp = std::make_unique<sys::fs::TempFile>(std::move(*temp));
  raw_fd_ostream os(file.temp->FD, /*shouldClose=*/false);
  if (json)
    os << file.text;
  else
    write(os);
  os.flush();
  file.text.clear();
  std::error_code error = os.error();
  if (error) {
    os.clear_error();
    consumeError(file.temp->discard());
    return fileError(path, "cannot write: " + error.message());
  }
  pending.push_back(std::move(file));
  return Error::success();
}

Error OutputFiles::commit() {
  std::vector<std::string> placed;
  std::optional<std::string> failure;
  // The renames first: they can fail, and are undone if one does.
  for (Pending &file : pending) {
    if (file.direct)
      continue;
    std::string tempName = file.temp->TmpName;
    std::string destination = file.target.empty() ? file.path : file.target;
    Error kept = file.temp->keep(destination);
    file.temp.reset();
    if (kept) {
      // A failed rename leaves the temporary behind.
      sys::fs::remove(tempName);
      failure =
          "'" + file.path + "': cannot write: " + toString(std::move(kept));
      break;
    }
    placed.push_back(destination);
  }
  // Then stdout, devices and FIFOs, which cannot be taken back.
  for (Pending &file : pending) {
    if (failure)
      break;
    if (!file.direct)
      continue;
    if (file.path == "-") {
      outs() << file.text;
      outs().flush();
      continue;
    }
    std::error_code error;
    raw_fd_ostream os(file.path, error, sys::fs::OF_None);
    if (!error) {
      os << file.text;
      os.close();
      error = os.error();
      os.clear_error();
    }
    if (error)
      failure = "'" + file.path + "': cannot write: " + error.message();
  }
  // The temporaries after a failed rename are discarded by the destructor.
  if (!failure)
    pending.clear();
  if (!failure)
    return Error::success();
  // Half a command's outputs would read as a whole.
  for (const std::string &path : placed)
    sys::fs::remove(path);
  return createStringError(inconvertibleErrorCode(), *failure);
}
