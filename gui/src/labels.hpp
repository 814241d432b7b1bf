// The GUI's names for library fields: a FieldError, a planner suggestion or a plan note names
// request fields ({global_batch}, tp, max_gpus, ...); the GUI shows the labels of its own
// inputs instead, quoted, so a user finds the input to change.
#pragma once

#include <exception>
#include <string>

namespace dtplan::gui {

// The quoted label of the input that sets `field` ("global batch (plan)" for global_batch);
// a field the form has no input for keeps its own name, quoted.
std::string label_of(const std::string& field);

// `text` with every {field} marker rendered as label_of(field).
std::string with_labels(const std::string& text);

// The message of an exception: a FieldError as "LABEL: PROBLEM", and the {field} markers of
// any message rendered as labels.
std::string message_of(const std::exception& e);

}  // namespace dtplan::gui
