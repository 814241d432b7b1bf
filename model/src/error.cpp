// Field errors (see error.hpp).
#include "dtplan/model/error.hpp"

#include <utility>

namespace dtplan {
namespace {

std::string substitute(const std::string& text, const FieldError::NameFn& name_of) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto open = text.find('{', i);
    const auto close = open == std::string::npos ? open : text.find('}', open);
    if (close == std::string::npos) {
      out += text.substr(i);
      break;
    }
    out += text.substr(i, open - i) + name_of(text.substr(open + 1, close - open - 1));
    i = close + 1;
  }
  return out;
}

std::string same(const std::string& field) {
  return field;
}

}  // namespace

std::string render_fields(const std::string& text,
                          const std::function<std::string(const std::string&)>& name_of) {
  return substitute(text, name_of);
}

FieldError::FieldError(std::string field, std::string problem)
    : Error(field + ": " + substitute(problem, same)),
      field_(std::move(field)),
      problem_(std::move(problem)) {}

std::string FieldError::render(const NameFn& name_of) const {
  return name_of(field_) + ": " + substitute(problem_, name_of);
}

std::string rendered(const std::exception& e, const FieldError::NameFn& name_of) {
  if (const auto* f = dynamic_cast<const FieldError*>(&e)) return f->render(name_of);
  return substitute(e.what(), name_of);
}

}  // namespace dtplan
