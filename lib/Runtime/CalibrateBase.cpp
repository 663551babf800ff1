//===- CalibrateBase.cpp - lethe-calibrate: reading a base profile --------===//
//
// lethe-calibrate --base FILE carries the fields it does not measure over
// from FILE. The runtime links no JSON library (it builds without LLVM), so
// this splits JSON objects into members kept as raw text: enough to copy
// values and notes verbatim. The profile loader (lib/Support) validates
// what the tool writes.
//
//===----------------------------------------------------------------------===//

#include "lethe/Runtime/Calibrate.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace lethe::rt;
using namespace lethe::rt::calibrate;

const std::string *RawObject::get(const std::string &key) const {
  for (const auto &[k, v] : members)
    if (k == key)
      return &v;
  return nullptr;
}

namespace {

/// Splits JSON text into members without building values: strings are
/// decoded only where they are keys.
class Scanner {
public:
  explicit Scanner(const std::string &text) : s(text) {}

  bool object(RawObject &out) {
    space();
    if (!eat('{'))
      return fail("expected '{'");
    space();
    if (eat('}'))
      return true;
    while (true) {
      space();
      std::string key;
      if (!string(&key))
        return fail("expected a quoted member name");
      space();
      if (!eat(':'))
        return fail("expected ':' after \"" + key + "\"");
      space();
      size_t start = i;
      if (!value())
        return false;
      out.members.emplace_back(key, s.substr(start, i - start));
      space();
      if (eat(','))
        continue;
      if (eat('}'))
        return true;
      return fail("expected ',' or '}'");
    }
  }

  bool end() {
    space();
    return i == s.size() || fail("unexpected text after the object");
  }

  std::string error;

private:
  bool value() {
    if (i >= s.size())
      return fail("unexpected end of text");
    char c = s[i];
    if (c == '"')
      return string(nullptr);
    if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      ++i;
      space();
      if (eat(close))
        return true;
      while (true) {
        space();
        if (c == '{') {
          if (!string(nullptr))
            return fail("expected a quoted member name");
          space();
          if (!eat(':'))
            return fail("expected ':'");
          space();
        }
        if (!value())
          return false;
        space();
        if (eat(','))
          continue;
        if (eat(close))
          return true;
        return fail(std::string("expected ',' or '") + close + "'");
      }
    }
    size_t start = i;
    while (i < s.size() && (std::isalnum((unsigned char)s[i]) || s[i] == '-' ||
                            s[i] == '+' || s[i] == '.'))
      ++i;
    if (i == start)
      return fail(std::string("unexpected character '") + c + "'");
    std::string word = s.substr(start, i - start);
    if (word == "true" || word == "false" || word == "null")
      return true;
    char *endp = nullptr;
    std::strtod(word.c_str(), &endp);
    if (*endp)
      return fail("bad number '" + word + "'");
    return true;
  }

  bool string(std::string *decoded) {
    if (!eat('"'))
      return false;
    while (i < s.size() && s[i] != '"') {
      char c = s[i++];
      if (c != '\\') {
        if (decoded)
          *decoded += c;
        continue;
      }
      if (i >= s.size())
        break;
      char e = s[i++];
      if (e == 'u') {
        if (i + 4 > s.size())
          return fail("bad \\u escape");
        unsigned code = std::stoul(s.substr(i, 4), nullptr, 16);
        i += 4;
        if (decoded) {
          // Keys are ASCII in practice; encode the BMP as UTF-8 anyway.
          if (code < 0x80) {
            *decoded += (char)code;
          } else if (code < 0x800) {
            *decoded += (char)(0xC0 | (code >> 6));
            *decoded += (char)(0x80 | (code & 0x3F));
          } else {
            *decoded += (char)(0xE0 | (code >> 12));
            *decoded += (char)(0x80 | ((code >> 6) & 0x3F));
            *decoded += (char)(0x80 | (code & 0x3F));
          }
        }
        continue;
      }
      const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
      const char *at = std::strchr(from, e);
      if (!at || !e)
        return fail(std::string("bad escape '\\") + e + "'");
      if (decoded)
        *decoded += to[at - from];
    }
    return eat('"') || fail("unterminated string");
  }

  void space() {
    while (i < s.size() && std::isspace((unsigned char)s[i]))
      ++i;
  }
  bool eat(char c) {
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  bool fail(const std::string &message) {
    if (error.empty())
      error = "line " +
              std::to_string(1 + std::count(s.begin(), s.begin() + i, '\n')) +
              ": " + message;
    return false;
  }

  const std::string &s;
  size_t i = 0;
};

} // namespace

bool calibrate::parseRawObject(const std::string &text, RawObject &object,
                               std::string &error) {
  Scanner scanner(text);
  object.members.clear();
  if (scanner.object(object) && scanner.end())
    return true;
  error = scanner.error;
  return false;
}

bool calibrate::loadBaseProfile(const std::string &path, BaseProfile &base,
                                std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = path + ": cannot read the base profile";
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  base.path = path;
  std::string why;
  if (!parseRawObject(text.str(), base.fields, why)) {
    error = path + ": " + why;
    return false;
  }
  struct {
    const char *key;
    RawObject *into;
  } nested[] = {{"peak_tflops", &base.peakTflops},
                {"kernel_efficiency", &base.kernelEfficiency},
                {"notes", &base.notes}};
  for (auto &n : nested) {
    const std::string *raw = base.fields.get(n.key);
    if (raw && !parseRawObject(*raw, *n.into, why)) {
      error = path + ": field '" + n.key + "': " + why;
      return false;
    }
  }
  return true;
}
