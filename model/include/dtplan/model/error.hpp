// The exception types dtplan libraries throw. Their messages are complete and user-facing:
// they name the input (file:line, key path, request field) and the problem. Only cli/ and
// gui/ turn them into an exit code or a dialog.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

namespace dtplan {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A problem with one field of a library request (PlanRequest::headroom, CalibrateRequest::np).
// Libraries name fields, not command-line flags: the problem text refers to other fields as
// {name}, and each front end renders names its own way (the CLI as its flags, the GUI as its
// input labels). what() renders them as the field names themselves.
class FieldError;

// `text` with every {name} in it passed through `name_of` (a library's message or suggestion
// that refers to request fields, rendered by a front end).
std::string render_fields(const std::string& text,
                          const std::function<std::string(const std::string&)>& name_of);

class FieldError : public Error {
 public:
  using NameFn = std::function<std::string(const std::string& field)>;

  FieldError(std::string field, std::string problem);
  const std::string& field() const { return field_; }
  const std::string& problem() const { return problem_; }
  // "FIELD: PROBLEM", the field and every {name} in the problem passed through `name_of`.
  std::string render(const NameFn& name_of) const;

 private:
  std::string field_;
  std::string problem_;
};

// The message of any exception as a front end shows it: a FieldError rendered (its field and
// the {name} markers of its problem through `name_of`), any other exception's what() with its
// {name} markers rendered (library rules that mention request fields, such as an offload mode
// a strategy does not offer).
std::string rendered(const std::exception& e, const FieldError::NameFn& name_of);

}  // namespace dtplan
