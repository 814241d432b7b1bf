// Checked reading of JSON inputs. Every dtplan file is parsed into structs through an
// ObjectReader, which checks presence and type of each key, and whose reject_unknown_keys()
// turns a typo into an error. Errors read "file:line: /key/path: problem".
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dtplan/model/number_range.hpp"

namespace dtplan {

// A parsed JSON document and where it came from.
struct JsonDocument {
  std::string origin;  // a file path, or a label such as "<test>"
  std::string text;    // the raw text, kept to turn key paths into line numbers
  nlohmann::json root;

  // The 1-based line of the value at JSON pointer `pointer`, or of its deepest ancestor that
  // exists (as line_of_pointer). The first call scans the text once for every value's line,
  // so that locating each of many rows costs a lookup, not a scan of the whole file.
  int line_of(std::string_view pointer) const;

 private:
  mutable std::once_flag lines_once_;
  mutable std::unordered_map<std::string, int> lines_;
};

// Parses text; malformed JSON or a duplicate key throws "origin:line:column: ...".
std::shared_ptr<const JsonDocument> parse_json(std::string text, std::string origin);
// Reads and parses a file; an unreadable file throws naming the path.
std::shared_ptr<const JsonDocument> read_json_file(const std::filesystem::path& path);

// The 1-based line in `text` of the value at JSON pointer `pointer`, or of its deepest
// ancestor that exists. Returns 0 when the text cannot be scanned.
int line_of_pointer(std::string_view text, std::string_view pointer);

// Escapes one key for use in a JSON pointer (RFC 6901).
std::string pointer_token(std::string_view key);

class ObjectReader {
 public:
  // The document's root, which must be an object.
  static ObjectReader root(std::shared_ptr<const JsonDocument> doc);

  bool has(std::string_view key) const;  // present and not null

  std::int64_t integer(std::string_view key) const;
  std::int64_t positive_integer(std::string_view key) const;
  std::optional<std::int64_t> optional_integer(std::string_view key) const;
  double number(std::string_view key) const;
  std::optional<double> optional_number(std::string_view key) const;
  // A number inside `range` (finite, within its sane maximum); errors state the range.
  double number(std::string_view key, const NumberRange& range) const;
  std::optional<double> optional_number(std::string_view key, const NumberRange& range) const;
  // An integer in [min, max].
  std::int64_t integer(std::string_view key, std::int64_t min, std::int64_t max) const;
  bool boolean(std::string_view key) const;
  std::optional<bool> optional_boolean(std::string_view key) const;
  std::string string(std::string_view key) const;
  std::optional<std::string> optional_string(std::string_view key) const;
  std::vector<std::string> strings(std::string_view key) const;
  std::vector<std::int64_t> integers(std::string_view key) const;
  ObjectReader object(std::string_view key) const;
  std::optional<ObjectReader> optional_object(std::string_view key) const;
  std::vector<ObjectReader> objects(std::string_view key) const;
  // The raw value (marks the key as read); throws if absent.
  const nlohmann::json& value(std::string_view key) const;

  // Throws naming the first key that no getter asked for, with the keys that are known.
  void reject_unknown_keys() const;
  // Requires "schema_version" to be an integer in [1, supported].
  void check_schema_version(std::int64_t supported) const;

  [[noreturn]] void fail(std::string_view key, std::string_view message) const;
  [[noreturn]] void fail_here(std::string_view message) const;
  // "file:line: /path/key" for messages built by callers.
  std::string location(std::string_view key) const;
  const std::string& pointer() const { return pointer_; }
  const JsonDocument& document() const { return *doc_; }

  // Converts a JSON value to an int64 if it is an integral number; nullopt otherwise.
  static std::optional<std::int64_t> as_integer(const nlohmann::json& v);

 private:
  ObjectReader(std::shared_ptr<const JsonDocument> doc, const nlohmann::json* node,
               std::string pointer);
  const nlohmann::json* find(std::string_view key) const;
  const nlohmann::json& require(std::string_view key) const;
  std::string child(std::string_view key) const;
  [[noreturn]] void fail_at(const std::string& pointer, std::string_view message) const;

  std::shared_ptr<const JsonDocument> doc_;
  const nlohmann::json* node_;
  std::string pointer_;
  mutable std::set<std::string, std::less<>> seen_;
};

}  // namespace dtplan
