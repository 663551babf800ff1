//===- Json.h - A small JSON writer for the runner's report -----*- C++ -*-===//
//
// The runtime links no JSON library (it must build without LLVM), so the
// runner writes its report with this: objects, arrays, strings, numbers,
// indented two spaces per level.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_LIB_RUNTIME_JSON_H
#define LETHE_LIB_RUNTIME_JSON_H

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace lethe::rt {

class JsonWriter {
public:
  JsonWriter &beginObject() { return open('{'); }
  JsonWriter &endObject() { return close('}'); }
  JsonWriter &beginArray() { return open('['); }
  JsonWriter &endArray() { return close(']'); }

  JsonWriter &key(const std::string &name) {
    separate();
    out += quote(name) + ": ";
    afterKey = true;
    return *this;
  }

  JsonWriter &value(const std::string &s) { return raw(quote(s)); }
  JsonWriter &value(const char *s) { return raw(s ? quote(s) : "null"); }
  JsonWriter &value(bool b) { return raw(b ? "true" : "false"); }
  JsonWriter &value(int v) { return raw(std::to_string(v)); }
  JsonWriter &value(int64_t v) { return raw(std::to_string(v)); }
  JsonWriter &value(uint64_t v) { return raw(std::to_string(v)); }
  JsonWriter &value(double v) {
    if (!std::isfinite(v))
      return raw("null");
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.6g", v);
    return raw(buf);
  }
  JsonWriter &null() { return raw("null"); }

  template <typename T> JsonWriter &field(const std::string &name, T v) {
    key(name);
    return value(v);
  }

  const std::string &str() const { return out; }

  static std::string quote(const std::string &s) {
    std::string q = "\"";
    for (unsigned char c : s) {
      switch (c) {
      case '"':
        q += "\\\"";
        break;
      case '\\':
        q += "\\\\";
        break;
      case '\n':
        q += "\\n";
        break;
      case '\t':
        q += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          q += buf;
        } else {
          q += (char)c;
        }
      }
    }
    return q + "\"";
  }

private:
  JsonWriter &open(char bracket) {
    separate();
    out += bracket;
    counts.push_back(0);
    return *this;
  }
  JsonWriter &close(char bracket) {
    bool empty = counts.back() == 0;
    counts.pop_back();
    if (!empty)
      newline();
    out += bracket;
    if (counts.empty())
      out += "\n";
    return *this;
  }
  JsonWriter &raw(const std::string &text) {
    separate();
    out += text;
    return *this;
  }
  /// Before a value or key: a comma and newline unless it follows a key.
  void separate() {
    if (afterKey) {
      afterKey = false;
      return;
    }
    if (counts.empty())
      return;
    if (counts.back()++ > 0)
      out += ",";
    newline();
  }
  void newline() {
    out += "\n";
    out.append(2 * counts.size(), ' ');
  }

  std::string out;
  std::vector<int> counts;
  bool afterKey = false;
};

} // namespace lethe::rt

#endif // LETHE_LIB_RUNTIME_JSON_H
