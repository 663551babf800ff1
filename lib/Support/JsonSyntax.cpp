//===- JsonSyntax.cpp - Whether a text is JSON, without parsing it --------===//

#include "lethe/Support/JsonSyntax.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/JSON.h"

using namespace llvm;

namespace {

/// A one-pass recognizer of RFC 8259's grammar. Nesting is kept on an
/// explicit stack, so no document's depth can exhaust the call stack.
class Checker {
public:
  explicit Checker(StringRef text) : text(text) {}

  Error run() {
    size_t bad = 0;
    if (!json::isUTF8(text, &bad))
      return error("invalid UTF-8", bad);
    skipSpace();
    if (!value())
      return failure();
    // Closes the containers the value opened, element by element.
    while (!open.empty()) {
      skipSpace();
      char close = open.back() == '{' ? '}' : ']';
      if (consume(close)) {
        open.pop_back();
        continue;
      }
      if (!consume(','))
        return error(Twine("expected ',' or '") + Twine(close) + "'");
      skipSpace();
      if (!(open.back() == '{' ? member() : value()))
        return failure();
    }
    skipSpace();
    if (pos != text.size())
      return error("text after the JSON value");
    return Error::success();
  }

private:
  /// A value; a container's opening (and its first element or its close)
  /// leaves the rest of it to run().
  bool value() {
    while (true) {
      if (pos == text.size())
        return fail("expected a value, found the end");
      char c = text[pos];
      if (c == '{' || c == '[') {
        ++pos;
        skipSpace();
        if (consume(c == '{' ? '}' : ']'))
          return true;
        open.push_back(c);
        if (c == '{')
          return member();
        continue; // the array's first element
      }
      if (c == '"')
        return string();
      if (c == '-' || (c >= '0' && c <= '9'))
        return number();
      for (StringRef literal : {"true", "false", "null"})
        if (text.substr(pos).starts_with(literal)) {
          pos += literal.size();
          return true;
        }
      return fail("invalid value");
    }
  }

  /// `"key": value` of an object.
  bool member() {
    if (pos == text.size() || text[pos] != '"')
      return fail("expected a member name");
    if (!string())
      return false;
    skipSpace();
    if (!consume(':'))
      return fail("expected ':'");
    skipSpace();
    return value();
  }

  bool string() {
    ++pos; // the opening quote
    while (pos < text.size()) {
      unsigned char c = text[pos++];
      if (c == '"')
        return true;
      if (c < 0x20)
        return fail("control character in a string");
      if (c != '\\')
        continue;
      if (pos == text.size())
        break;
      char escaped = text[pos++];
      if (StringRef("\"\\/bfnrt").contains(escaped))
        continue;
      if (escaped != 'u')
        return fail("invalid escape");
      for (int i = 0; i < 4; ++i, ++pos)
        if (pos == text.size() || !isHexDigit(text[pos]))
          return fail("invalid \\u escape");
    }
    return fail("unterminated string");
  }

  bool number() {
    consume('-');
    if (consume('0')) {
      // no leading zeros
    } else if (!digits()) {
      return fail("invalid number");
    }
    if (consume('.') && !digits())
      return fail("invalid number");
    if (consume('e') || consume('E')) {
      if (!consume('+'))
        consume('-');
      if (!digits())
        return fail("invalid number");
    }
    return true;
  }

  bool digits() {
    size_t start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9')
      ++pos;
    return pos > start;
  }

  static bool isHexDigit(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
           (c >= 'A' && c <= 'F');
  }

  bool consume(char c) {
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }

  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }

  bool fail(const char *what) {
    message = what;
    return false;
  }
  Error failure() { return error(message); }
  Error error(const Twine &what) { return error(what, pos); }
  Error error(const Twine &what, size_t at) {
    return createStringError(inconvertibleErrorCode(),
                             "byte " + Twine(at) + ": " + what);
  }

  StringRef text;
  size_t pos = 0;
  /// The containers open around `pos`: '{' or '['.
  SmallVector<char, 32> open;
  const char *message = "";
};

} // namespace

Error lethe::checkJsonSyntax(StringRef text) { return Checker(text).run(); }
