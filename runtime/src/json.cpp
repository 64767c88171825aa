#include "json.h"

#include <charconv>

namespace fsattn::json {

const Value *Value::find(const std::string &key) const {
  if (kind != Object) return nullptr;
  for (const auto &[k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {

constexpr int kMaxDepth = 32;

class Parser {
 public:
  explicit Parser(const std::string &text) : s_(text) {}

  bool document(Value *out, std::string *error) {
    bool ok = value(out, 0) && (space(), at_end() || fail("text after the JSON value"));
    if (!ok) *error = error_;
    return ok;
  }

 private:
  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[i_]; }

  bool fail(const std::string &what) {
    if (!error_.empty()) return false;
    size_t line = 1, column = 1;
    for (size_t j = 0; j < i_ && j < s_.size(); ++j) {
      column = s_[j] == '\n' ? 1 : column + 1;
      line += s_[j] == '\n';
    }
    error_ = "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what;
    return false;
  }

  void space() {
    while (!at_end() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }

  bool literal(const char *word) {
    for (const char *c = word; *c != '\0'; ++c, ++i_) {
      if (peek() != *c) return fail(std::string("expected '") + word + "'");
    }
    return true;
  }

  bool value(Value *out, int depth) {
    space();
    if (depth > kMaxDepth) return fail("nested more than " + std::to_string(kMaxDepth) + " levels deep");
    switch (peek()) {
      case '{': return object(out, depth);
      case '[': return array(out, depth);
      case '"': out->kind = Value::String; return string(&out->string);
      case 't': out->kind = Value::Bool; out->boolean = true; return literal("true");
      case 'f': out->kind = Value::Bool; out->boolean = false; return literal("false");
      case 'n': out->kind = Value::Null; return literal("null");
      default: out->kind = Value::Number; return number(&out->number);
    }
  }

  bool object(Value *out, int depth) {
    out->kind = Value::Object;
    ++i_;  // '{'
    space();
    if (peek() == '}') return ++i_, true;
    while (true) {
      space();
      std::string key;
      if (peek() != '"') return fail("expected a member name in quotes");
      if (!string(&key)) return false;
      space();
      if (peek() != ':') return fail("expected ':' after a member name");
      ++i_;
      Value v;
      if (!value(&v, depth + 1)) return false;
      out->members.emplace_back(std::move(key), std::move(v));
      space();
      if (peek() == '}') return ++i_, true;
      if (peek() != ',') return fail("expected ',' or '}' in an object");
      ++i_;
    }
  }

  bool array(Value *out, int depth) {
    out->kind = Value::Array;
    ++i_;  // '['
    space();
    if (peek() == ']') return ++i_, true;
    while (true) {
      Value v;
      if (!value(&v, depth + 1)) return false;
      out->items.push_back(std::move(v));
      space();
      if (peek() == ']') return ++i_, true;
      if (peek() != ',') return fail("expected ',' or ']' in an array");
      ++i_;
    }
  }

  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  bool code_unit(unsigned *u) {
    *u = 0;
    for (int n = 0; n < 4; ++n, ++i_) {
      const int h = hex(peek());
      if (h < 0) return fail("expected four hex digits after \\u");
      *u = *u * 16 + unsigned(h);
    }
    return true;
  }

  static void append_utf8(std::string *out, unsigned cp) {
    if (cp < 0x80) {
      *out += char(cp);
    } else if (cp < 0x800) {
      *out += char(0xC0 | (cp >> 6));
      *out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += char(0xE0 | (cp >> 12));
      *out += char(0x80 | ((cp >> 6) & 0x3F));
      *out += char(0x80 | (cp & 0x3F));
    } else {
      *out += char(0xF0 | (cp >> 18));
      *out += char(0x80 | ((cp >> 12) & 0x3F));
      *out += char(0x80 | ((cp >> 6) & 0x3F));
      *out += char(0x80 | (cp & 0x3F));
    }
  }

  bool string(std::string *out) {
    ++i_;  // '"'
    while (true) {
      if (at_end()) return fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return --i_, fail("control character in a string");
      if (c != '\\') {
        *out += c;
        continue;
      }
      const char e = peek();
      ++i_;
      switch (e) {
        case '"': *out += '"'; break;
        case '\\': *out += '\\'; break;
        case '/': *out += '/'; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'n': *out += '\n'; break;
        case 'r': *out += '\r'; break;
        case 't': *out += '\t'; break;
        case 'u': {
          unsigned cp = 0;
          if (!code_unit(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {  // a surrogate pair
            unsigned low = 0;
            if (peek() != '\\' || (++i_, peek() != 'u')) return fail("unpaired surrogate in \\u escape");
            ++i_;
            if (!code_unit(&low)) return false;
            if (low < 0xDC00 || low >= 0xE000) return fail("unpaired surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            return fail("unpaired surrogate in \\u escape");
          }
          append_utf8(out, cp);
          break;
        }
        default: return --i_, fail("unknown escape in a string");
      }
    }
  }

  bool digits() {
    const size_t start = i_;
    while (peek() >= '0' && peek() <= '9') ++i_;
    return i_ > start || fail("expected a digit");
  }

  bool number(double *out) {
    const size_t start = i_;
    if (peek() == '-') ++i_;
    if (peek() == '0') {
      ++i_;
    } else if (peek() < '1' || peek() > '9') {
      return fail("expected a value");
    } else if (!digits()) {
      return false;
    }
    if (peek() == '.' && (++i_, !digits())) return false;
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      if (!digits()) return false;
    }
    // from_chars: the C locale's decimal point whatever the host application set.
    const auto r = std::from_chars(s_.data() + start, s_.data() + i_, *out);
    return r.ec == std::errc() || (i_ = start, fail("number out of range"));
  }

  const std::string &s_;
  size_t i_ = 0;
  std::string error_;
};

}  // namespace

bool parse(const std::string &text, Value *out, std::string *error) {
  *out = Value();
  return Parser(text).document(out, error);
}

}  // namespace fsattn::json
