// Checked JSON reading: parse with positions, locate key paths, typed getters.
#include "dtplan/model/json_reader.hpp"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "dtplan/model/error.hpp"
#include "dtplan/model/suggest.hpp"

namespace dtplan {

namespace {

struct LineColumn {
  int line = 1;
  int column = 1;
};

LineColumn line_column_at(std::string_view text, std::size_t byte) {
  LineColumn lc;
  for (std::size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++lc.line;
      lc.column = 1;
    } else {
      ++lc.column;
    }
  }
  return lc;
}

// nlohmann's message starts "[json.exception.parse_error.101] parse error at line 1, column 2: ";
// keep only what follows the position.
std::string strip_parse_prefix(const std::string& what) {
  const auto column = what.find("column ");
  if (column == std::string::npos) return what;
  const auto colon = what.find(": ", column);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

// "[json.exception.out_of_range.406] number overflow parsing '1e400'" as
// "line 3: number overflow parsing '1e400'", the line being that of the number's first
// occurrence.
std::string out_of_range_message(std::string_view text, const std::string& what) {
  const auto bracket = what.find("] ");
  std::string message = bracket == std::string::npos ? what : what.substr(bracket + 2);
  const auto open = message.find('\'');
  const auto close = message.rfind('\'');
  if (open == std::string::npos || close <= open + 1) return message;
  const auto at = text.find(std::string_view(message).substr(open + 1, close - open - 1));
  if (at == std::string_view::npos) return message;
  return "line " + std::to_string(line_column_at(text, at).line) + ": " + message;
}

constexpr int kMaxDepth = 64;

struct TooDeep {};

// Rejects duplicate keys in any object while parsing (nlohmann keeps the last silently), and
// nesting deeper than any dtplan input needs (so later recursive scans stay bounded).
class DuplicateKeyGuard {
 public:
  bool operator()(int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (depth > kMaxDepth) throw TooDeep{};
    if (event == E::object_start) keys_.emplace_back();
    if (event == E::object_end && !keys_.empty()) keys_.pop_back();
    if (event == E::key && !keys_.empty()) {
      const auto key = parsed.get<std::string>();
      if (!keys_.back().insert(key).second) duplicate_ = key;
    }
    return true;
  }
  const std::optional<std::string>& duplicate() const { return duplicate_; }

 private:
  std::vector<std::set<std::string>> keys_;
  std::optional<std::string> duplicate_;
};

// Records the line where each value of a JSON text starts, by its JSON pointer, in one pass.
// It assumes the text already parsed (parse_json), so its nesting is at most kMaxDepth.
class LineScanner {
 public:
  explicit LineScanner(std::string_view text) : text_(text) {}

  std::unordered_map<std::string, int> scan() {
    skip_ws();
    value("");
    return std::move(lines_);
  }

 private:
  void skip_ws() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') ++line_;
      if (c != ' ' && c != '\n' && c != '\t' && c != '\r') break;
      ++pos_;
    }
  }
  std::string read_string() {
    std::string out;
    ++pos_;  // opening quote
    while (pos_ < text_.size() && text_[pos_] != '"') {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) {
        ++pos_;
        const char e = text_[pos_];
        out += (e == 'n') ? '\n' : (e == 't') ? '\t' : e;
      } else {
        out += text_[pos_];
      }
      ++pos_;
    }
    ++pos_;  // closing quote
    return out;
  }
  void value(const std::string& pointer) {
    lines_[pointer] = line_;
    if (pos_ >= text_.size()) return;
    const char c = text_[pos_];
    if (c == '{') {
      object(pointer);
    } else if (c == '[') {
      array(pointer);
    } else if (c == '"') {
      read_string();
    } else {
      while (pos_ < text_.size() &&
             std::string_view(",]} \n\t\r").find(text_[pos_]) == std::string_view::npos) {
        ++pos_;
      }
    }
  }
  // After a member or an element: the separating comma, if any.
  void next() {
    skip_ws();
    if (pos_ < text_.size() && text_[pos_] == ',') ++pos_;
    skip_ws();
  }
  void object(const std::string& pointer) {
    ++pos_;
    skip_ws();
    while (pos_ < text_.size() && text_[pos_] != '}') {
      const std::string key = read_string();
      skip_ws();
      ++pos_;  // colon
      skip_ws();
      value(pointer + "/" + pointer_token(key));
      next();
    }
    ++pos_;
  }
  void array(const std::string& pointer) {
    ++pos_;
    skip_ws();
    for (int index = 0; pos_ < text_.size() && text_[pos_] != ']'; ++index) {
      value(pointer + "/" + std::to_string(index));
      next();
    }
    ++pos_;
  }

  std::string_view text_;
  std::unordered_map<std::string, int> lines_;
  std::size_t pos_ = 0;
  int line_ = 1;
};

// The line of `pointer` in `lines`, or of its deepest ancestor there; 0 when none is.
int line_in(const std::unordered_map<std::string, int>& lines, std::string_view pointer) {
  std::string p(pointer);
  for (;;) {
    if (const auto it = lines.find(p); it != lines.end()) return it->second;
    if (p.empty()) return 0;
    const auto slash = p.rfind('/');
    p.erase(slash == std::string::npos ? 0 : slash);
  }
}

const char* type_name(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

}  // namespace

std::shared_ptr<const JsonDocument> parse_json(std::string text, std::string origin) {
  auto doc = std::make_shared<JsonDocument>();
  doc->origin = std::move(origin);
  doc->text = std::move(text);
  DuplicateKeyGuard guard;
  try {
    doc->root = nlohmann::json::parse(doc->text, std::ref(guard));
  } catch (const TooDeep&) {
    throw Error(doc->origin + ": JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
  } catch (const nlohmann::json::parse_error& e) {
    const auto lc = line_column_at(doc->text, e.byte == 0 ? 0 : e.byte - 1);
    throw Error(doc->origin + ":" + std::to_string(lc.line) + ":" + std::to_string(lc.column) +
                ": malformed JSON: " + strip_parse_prefix(e.what()));
  } catch (const nlohmann::json::out_of_range& e) {
    // A number beyond a double's range ("1e400"). nlohmann says which number but not where,
    // and its exception is not a parse_error: found by fuzzing (tests/fuzz/regressions).
    throw Error(doc->origin + ": malformed JSON: " + out_of_range_message(doc->text, e.what()));
  }
  if (guard.duplicate()) {
    throw Error(doc->origin + ": duplicate key \"" + *guard.duplicate() + "\"");
  }
  return doc;
}

std::shared_ptr<const JsonDocument> read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open file for reading");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error(path.string() + ": read error");
  return parse_json(buffer.str(), path.string());
}

int line_of_pointer(std::string_view text, std::string_view pointer) {
  return line_in(LineScanner(text).scan(), pointer);
}

int JsonDocument::line_of(std::string_view pointer) const {
  std::call_once(lines_once_, [this] { lines_ = LineScanner(text).scan(); });
  return line_in(lines_, pointer);
}

std::string pointer_token(std::string_view key) {
  std::string out;
  for (const char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

ObjectReader::ObjectReader(std::shared_ptr<const JsonDocument> doc, const nlohmann::json* node,
                           std::string pointer)
    : doc_(std::move(doc)), node_(node), pointer_(std::move(pointer)) {
  if (!node_->is_object()) {
    fail_at(pointer_, std::string("expected an object, got ") + type_name(*node_));
  }
}

ObjectReader ObjectReader::root(std::shared_ptr<const JsonDocument> doc) {
  const nlohmann::json* node = &doc->root;
  return ObjectReader(std::move(doc), node, "");
}

std::string ObjectReader::child(std::string_view key) const {
  return pointer_ + "/" + pointer_token(key);
}

std::string ObjectReader::location(std::string_view key) const {
  const std::string ptr = key.empty() ? pointer_ : child(key);
  const int line = doc_->line_of(ptr);
  std::string where = doc_->origin;
  if (line > 0) {
    where += ':';
    where += std::to_string(line);
  }
  return where + ": " + (ptr.empty() ? "/" : ptr);
}

void ObjectReader::fail_at(const std::string& pointer, std::string_view message) const {
  const int line = doc_->line_of(pointer);
  std::string where = doc_->origin;
  if (line > 0) {
    where += ':';
    where += std::to_string(line);
  }
  throw Error(where + ": " + (pointer.empty() ? "/" : pointer) + ": " + std::string(message));
}

void ObjectReader::fail(std::string_view key, std::string_view message) const {
  fail_at(child(key), message);
}

void ObjectReader::fail_here(std::string_view message) const {
  fail_at(pointer_, message);
}

const nlohmann::json* ObjectReader::find(std::string_view key) const {
  seen_.emplace(key);
  const auto it = node_->find(std::string(key));
  if (it == node_->end() || it->is_null()) return nullptr;
  return &*it;
}

const nlohmann::json& ObjectReader::require(std::string_view key) const {
  const auto* v = find(key);
  if (v != nullptr) return *v;
  if (node_->contains(std::string(key))) fail(key, "required, got null");
  std::vector<std::string> present;
  for (const auto& item : node_->items())
    if (item.key() != key) present.push_back(item.key());
  const auto close = close_names(key, present, 1);
  fail(key, close.empty() ? std::string("missing required key")
                          : "missing required key (found '" + close.front() + "': a typo?)");
}

bool ObjectReader::has(std::string_view key) const {
  const auto it = node_->find(std::string(key));
  return it != node_->end() && !it->is_null();
}

std::optional<std::int64_t> ObjectReader::as_integer(const nlohmann::json& v) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() &&
        v.get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return std::nullopt;
    }
    return v.get<std::int64_t>();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.2e18) {
      return static_cast<std::int64_t>(d);
    }
  }
  return std::nullopt;
}

std::int64_t ObjectReader::integer(std::string_view key) const {
  const auto& v = require(key);
  const auto i = as_integer(v);
  if (!i) fail(key, std::string("expected an integer, got ") + type_name(v) + " " + v.dump());
  return *i;
}

std::int64_t ObjectReader::positive_integer(std::string_view key) const {
  const auto i = integer(key);
  if (i <= 0) fail(key, "must be a positive integer, got " + std::to_string(i));
  return i;
}

std::optional<std::int64_t> ObjectReader::optional_integer(std::string_view key) const {
  if (!has(key)) {
    find(key);
    return std::nullopt;
  }
  return integer(key);
}

double ObjectReader::number(std::string_view key) const {
  const auto& v = require(key);
  if (!v.is_number()) fail(key, std::string("expected a number, got ") + type_name(v));
  const double d = v.get<double>();
  if (!std::isfinite(d)) fail(key, "must be finite, got " + v.dump());
  return d;
}

std::optional<double> ObjectReader::optional_number(std::string_view key) const {
  if (!has(key)) {
    find(key);
    return std::nullopt;
  }
  return number(key);
}

double ObjectReader::number(std::string_view key, const NumberRange& range) const {
  const double v = number(key);
  if (const auto problem = range_problem(v, range)) fail(key, *problem);
  return v;
}

std::optional<double> ObjectReader::optional_number(std::string_view key,
                                                    const NumberRange& range) const {
  if (!has(key)) {
    find(key);
    return std::nullopt;
  }
  return number(key, range);
}

std::int64_t ObjectReader::integer(std::string_view key, std::int64_t min, std::int64_t max) const {
  const auto i = integer(key);
  if (i < min || i > max) {
    fail(key, "must be an integer from " + std::to_string(min) + " to " + std::to_string(max) +
                  ", got " + std::to_string(i));
  }
  return i;
}

bool ObjectReader::boolean(std::string_view key) const {
  const auto& v = require(key);
  if (!v.is_boolean()) fail(key, std::string("expected true or false, got ") + type_name(v));
  return v.get<bool>();
}

std::optional<bool> ObjectReader::optional_boolean(std::string_view key) const {
  if (!has(key)) {
    find(key);
    return std::nullopt;
  }
  return boolean(key);
}

std::string ObjectReader::string(std::string_view key) const {
  const auto& v = require(key);
  if (!v.is_string()) fail(key, std::string("expected a string, got ") + type_name(v));
  return v.get<std::string>();
}

std::optional<std::string> ObjectReader::optional_string(std::string_view key) const {
  if (!has(key)) {
    find(key);
    return std::nullopt;
  }
  return string(key);
}

std::vector<std::string> ObjectReader::strings(std::string_view key) const {
  const auto& v = require(key);
  if (!v.is_array()) fail(key, std::string("expected an array of strings, got ") + type_name(v));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      fail_at(child(key) + "/" + std::to_string(i),
              std::string("expected a string, got ") + type_name(v[i]));
    }
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

std::vector<std::int64_t> ObjectReader::integers(std::string_view key) const {
  const auto& v = require(key);
  if (!v.is_array()) fail(key, std::string("expected an array of integers, got ") + type_name(v));
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto n = as_integer(v[i]);
    if (!n) {
      fail_at(child(key) + "/" + std::to_string(i),
              std::string("expected an integer, got ") + type_name(v[i]));
    }
    out.push_back(*n);
  }
  return out;
}

ObjectReader ObjectReader::object(std::string_view key) const {
  return ObjectReader(doc_, &require(key), child(key));
}

std::optional<ObjectReader> ObjectReader::optional_object(std::string_view key) const {
  if (!has(key)) {
    find(key);
    return std::nullopt;
  }
  return object(key);
}

std::vector<ObjectReader> ObjectReader::objects(std::string_view key) const {
  const auto& v = require(key);
  if (!v.is_array()) fail(key, std::string("expected an array of objects, got ") + type_name(v));
  std::vector<ObjectReader> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    out.push_back(ObjectReader(doc_, &v[i], child(key) + "/" + std::to_string(i)));
  }
  return out;
}

const nlohmann::json& ObjectReader::value(std::string_view key) const {
  return require(key);
}

void ObjectReader::reject_unknown_keys() const {
  for (const auto& [key, v] : node_->items()) {
    if (seen_.count(key) != 0) continue;
    std::string known;
    for (const auto& k : seen_)
      known += (known.empty() ? "" : ", ") + k;
    fail(key, "unknown key (known keys here: " + known + ")");
  }
}

void ObjectReader::check_schema_version(std::int64_t supported) const {
  const auto version = integer("schema_version");
  if (version < 1 || version > supported) {
    fail("schema_version", "unsupported version " + std::to_string(version) +
                               " (this dtplan reads versions 1 to " + std::to_string(supported) +
                               ")");
  }
}

}  // namespace dtplan
