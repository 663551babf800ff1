//===- JsonLocations.cpp - Where things are in a JSON text ----------------===//

#include "lethe/Import/JsonLocations.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstring>

using namespace mlir;
using namespace lethe;

namespace {
/// Bytes as the scans below see them outside strings: one table lookup per
/// byte, where a comparison against each special byte in turn made the
/// scans of a 25 MB graph ~2% of a `lethe plan` at 100k ops.
enum ByteKind : uint8_t { Plain, Quote, Open, Close, Separator, Space };
constexpr std::array<uint8_t, 256> kByteKinds = [] {
  std::array<uint8_t, 256> kinds{};
  kinds['"'] = Quote;
  kinds['['] = kinds['{'] = Open;
  kinds[']'] = kinds['}'] = Close;
  kinds[','] = kinds[':'] = Separator;
  kinds[' '] = kinds['\n'] = kinds['\t'] = kinds['\r'] = Space;
  return kinds;
}();
ByteKind kindOf(char c) {
  return static_cast<ByteKind>(kByteKinds[static_cast<unsigned char>(c)]);
}
} // namespace

/// The closing quote of the string whose text starts at `p` (just after its
/// opening quote): the first quote after an even run of backslashes, as a
/// byte-by-byte reading that skips the byte after each backslash finds it;
/// `end` when there is none.
static const char *findClosingQuote(const char *p, const char *end) {
  const char *start = p;
  while (p != end) {
    const char *quote =
        static_cast<const char *>(std::memchr(p, '"', end - p));
    if (!quote)
      return end;
    const char *run = quote;
    while (run != start && run[-1] == '\\')
      --run;
    if ((quote - run) % 2 == 0)
      return quote;
    p = quote + 1;
  }
  return end;
}

std::optional<size_t> lethe::findExcessiveJsonNesting(StringRef text) {
  // On invalid JSON the count may be off after the first error, but never on
  // the prefix the parser accepts, which is what bounds its recursion.
  unsigned depth = 0;
  const char *begin = text.begin(), *end = text.end();
  for (const char *p = begin; p != end; ++p) {
    switch (kindOf(*p)) {
    case Quote:
      p = findClosingQuote(p + 1, end);
      if (p == end)
        return std::nullopt;
      break;
    case Open:
      if (++depth > kMaxJsonNesting)
        return static_cast<size_t>(p - begin);
      break;
    case Close:
      if (depth > 0)
        --depth;
      break;
    default:
      break;
    }
  }
  return std::nullopt;
}

namespace {

/// Finds the array fields of the top-level object: where their brackets and
/// elements are. Values are skipped, not validated (string-aware bracket
/// counting); what it reports on invalid JSON is only ever a hint, and the
/// text between elements is checked to be a comma and whitespace, so that
/// a caller which parses each element and the rest of the text on its own
/// has checked every byte.
class TopLevelScanner {
public:
  explicit TopLevelScanner(StringRef text) : text(text) {}

  /// Fills the span `select` returns for each top-level key (none: the field
  /// is skipped); returns false when the text between elements of a
  /// selected array is not JSON.
  bool
  scan(llvm::function_ref<std::optional<JsonArraySpan> *(StringRef)> select) {
    bool wellFormed = true;
    skipSpace();
    if (!consume('{'))
      return wellFormed;
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
      std::optional<JsonArraySpan> *span = select(key);
      // A repeated key: llvm::json keeps the last one.
      if (span)
        span->reset();
      if (span && peek() == '[') {
        JsonArraySpan &array = span->emplace();
        array.open = pos++;
        skipSpace();
        if (peek() != ']') {
          while (pos < text.size()) {
            skipSpace();
            size_t begin = pos;
            skipValue();
            array.elements.push_back({begin, pos});
            wellFormed &= pos > begin;
            skipSpace();
            if (peek() != ',')
              break;
            ++pos;
          }
        }
        wellFormed &= peek() == ']';
        array.close = pos;
        consume(']');
        continue;
      }
      skipValue();
    }
    return wellFormed;
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
    const char *quote = findClosingQuote(text.begin() + pos + 1, text.end());
    pos = std::min(static_cast<size_t>(quote - text.begin()) + 1, text.size());
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
        // A number or literal: up to a separator, a closer or a space.
        while (pos < text.size() && kindOf(text[pos]) != Separator &&
               kindOf(text[pos]) != Close && kindOf(text[pos]) != Space)
          ++pos;
      }
    } while (depth > 0 && pos < text.size());
  }

  StringRef text;
  size_t pos = 0;
};

} // namespace

bool lethe::scanTopLevelArrays(
    StringRef text, ArrayRef<StringRef> keys,
    MutableArrayRef<std::optional<JsonArraySpan>> spans) {
  assert(keys.size() == spans.size() && "one span per key");
  for (std::optional<JsonArraySpan> &span : spans)
    span.reset();
  return TopLevelScanner(text).scan([&](StringRef field) {
    const StringRef *it = llvm::find(keys, field);
    return it == keys.end() ? nullptr : &spans[it - keys.begin()];
  });
}

SmallVector<std::vector<size_t>, 2>
lethe::findTopLevelArrayElements(StringRef text, ArrayRef<StringRef> keys) {
  SmallVector<std::optional<JsonArraySpan>, 2> spans(keys.size());
  (void)scanTopLevelArrays(text, keys, spans);
  SmallVector<std::vector<size_t>, 2> offsets(keys.size());
  for (auto [span, starts] : llvm::zip_equal(spans, offsets))
    if (span)
      for (auto [begin, end] : span->elements)
        starts.push_back(begin);
  return offsets;
}

std::vector<size_t> lethe::findTopLevelArrayElements(StringRef text,
                                                     StringRef key) {
  return std::move(findTopLevelArrayElements(text, ArrayRef(key))[0]);
}

Location TextLocator::at(size_t offset) {
  if (lineStarts.empty()) {
    lineStarts.push_back(0);
    const char *begin = text.begin(), *end = text.end();
    for (const char *p = begin;
         (p = static_cast<const char *>(std::memchr(p, '\n', end - p)));)
      lineStarts.push_back(static_cast<size_t>(++p - begin));
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
