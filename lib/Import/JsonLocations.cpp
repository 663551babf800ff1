//===- JsonLocations.cpp - Where things are in a JSON text ----------------===//

#include "lethe/Import/JsonLocations.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Regex.h"

#include <algorithm>

using namespace mlir;
using namespace lethe;

std::optional<size_t> lethe::findExcessiveJsonNesting(StringRef text) {
  // On invalid JSON the count may be off after the first error, but never on
  // the prefix the parser accepts, which is what bounds its recursion.
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
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonNesting)
        return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

namespace {

/// Finds where the elements of top-level array fields start. Runs on text
/// that has already parsed, so it only needs to skip values, not to validate
/// them.
class ElementOffsetScanner {
public:
  explicit ElementOffsetScanner(StringRef text) : text(text) {}

  /// Fills the vector `select` returns for each top-level key (none: the
  /// field is skipped) with where that array field's elements start.
  void scan(llvm::function_ref<std::vector<size_t> *(StringRef)> select) {
    skipSpace();
    if (!consume('{'))
      return;
    while (pos < text.size()) {
      skipSpace();
      if (consume('}'))
        break;
      consume(',');
      skipSpace();
      size_t keyStart = pos + 1;
      skipString();
      StringRef key = text.slice(keyStart, pos - 1);
      skipSpace();
      consume(':');
      skipSpace();
      // A repeated key: llvm::json keeps the last one.
      std::vector<size_t> *offsets = select(key);
      if (offsets && peek() == '[') {
        offsets->clear();
        ++pos;
        while (pos < text.size()) {
          skipSpace();
          if (consume(']'))
            break;
          consume(',');
          skipSpace();
          offsets->push_back(pos);
          skipValue();
        }
        continue;
      }
      skipValue();
    }
  }

private:
  char peek() const { return pos < text.size() ? text[pos] : '\0'; }
  bool consume(char c) {
    if (peek() != c)
      return false;
    ++pos;
    return true;
  }
  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n' ||
                                 text[pos] == '\t' || text[pos] == '\r'))
      ++pos;
  }
  void skipString() {
    ++pos; // the opening quote
    while (pos < text.size() && text[pos] != '"')
      pos += text[pos] == '\\' ? 2 : 1;
    ++pos;
  }
  /// Skips one value; nesting is tracked with a counter, not recursion.
  void skipValue() {
    unsigned depth = 0;
    do {
      skipSpace();
      char c = peek();
      if (c == '"') {
        skipString();
      } else if (c == '[' || c == '{') {
        ++depth;
        ++pos;
      } else if (c == ']' || c == '}') {
        if (depth == 0)
          return;
        --depth;
        ++pos;
      } else if (c == ',' || c == ':') {
        if (depth == 0)
          return;
        ++pos;
      } else if (c == '\0') {
        return;
      } else {
        while (pos < text.size() &&
               !StringRef(",:]} \n\t\r").contains(text[pos]))
          ++pos;
      }
    } while (depth > 0 && pos < text.size());
  }

  StringRef text;
  size_t pos = 0;
};

} // namespace

SmallVector<std::vector<size_t>, 2>
lethe::findTopLevelArrayElements(StringRef text, ArrayRef<StringRef> keys) {
  SmallVector<std::vector<size_t>, 2> offsets(keys.size());
  ElementOffsetScanner(text).scan([&](StringRef field) {
    const StringRef *it = llvm::find(keys, field);
    return it == keys.end() ? nullptr : &offsets[it - keys.begin()];
  });
  return offsets;
}

std::vector<size_t> lethe::findTopLevelArrayElements(StringRef text,
                                                     StringRef key) {
  return std::move(findTopLevelArrayElements(text, ArrayRef(key))[0]);
}

Location TextLocator::at(size_t offset) {
  if (lineStarts.empty()) {
    lineStarts.push_back(0);
    for (size_t i = 0, e = text.size(); i < e; ++i)
      if (text[i] == '\n')
        lineStarts.push_back(i + 1);
  }
  offset = std::min(offset, text.size());
  auto it = std::upper_bound(lineStarts.begin(), lineStarts.end(), offset);
  size_t line = static_cast<size_t>(it - lineStarts.begin());
  size_t column = offset - *(it - 1) + 1;
  return FileLineColLoc::get(fileName, static_cast<unsigned>(line),
                             static_cast<unsigned>(column));
}

Location lethe::locationInText(MLIRContext *context, StringRef fileName,
                               StringRef text, size_t offset) {
  return TextLocator(StringAttr::get(context, fileName), text).at(offset);
}

Location lethe::jsonParseErrorLocation(MLIRContext *context, StringRef fileName,
                                       std::string &message) {
  // ParseError prints "[line:col, byte=N]: message".
  SmallVector<StringRef, 4> groups;
  llvm::Regex pattern("^\\[([0-9]+):([0-9]+), byte=[0-9]+\\]: (.*)$");
  if (!pattern.match(message, &groups))
    return FileLineColLoc::get(context, fileName, 0, 0);
  unsigned line = 0, column = 0;
  groups[1].getAsInteger(10, line);
  groups[2].getAsInteger(10, column);
  message = groups[3].str();
  return FileLineColLoc::get(context, fileName, line, column);
}
