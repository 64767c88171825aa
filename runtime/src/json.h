// A small JSON reader for the tuning files (tuning.cpp): the whole grammar of RFC 8259,
// nesting limited to 32 levels, numbers as double. A file that does not parse gives an
// error naming the line and column; nothing is thrown.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace fsattn::json {

struct Value {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0.0;
  std::string string;
  std::vector<Value> items;                            // Array
  std::vector<std::pair<std::string, Value>> members;  // Object, in file order

  // The member named `key` of an object, or NULL (also when this is not an object).
  const Value *find(const std::string &key) const;
};

// Parses `text` into *out; on failure returns false with the reason in *error.
bool parse(const std::string &text, Value *out, std::string *error);

}  // namespace fsattn::json
