// The dtplan command-line application: registers subcommands, parses, runs the chosen one and
// turns library errors into a one-line message and an exit code.
#include "dtplan/cli/app.hpp"

#include <algorithm>
#include <map>
#include <regex>

#include "commands.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/suggest.hpp"
#include "dtplan/runtime/interrupt.hpp"
#include "format.hpp"

namespace dtplan::cli {

namespace {

// What an option's value must be, from its CLI11 type name ("INT", "UINT", "FLOAT").
std::string expected_value(const CLI::App& app, const std::string& flag) {
  std::string type;
  for (const auto* sub : app.get_subcommands()) {
    if (const auto* o = sub->get_option_no_throw(flag)) type = o->get_type_name();
  }
  if (type == "INT") return "a whole number";
  if (type == "UINT") return "a whole number, 0 or more";
  if (type == "FLOAT") return "a number";
  return type.empty() ? "a valid value" : "a value of type " + type;
}

// CLI11's messages, in the user's terms where they are obscure: a flag given twice reads
// "--gpus: At Most 1 required but received 2", a value that is not a number "Could not
// convert: --micro-batch = 4x".
std::string parse_error_message(const CLI::ParseError& e, const CLI::App& app) {
  std::string what = e.what();
  static const std::regex kRepeated("(\\S+): At Most 1 required but received ([0-9]+)");
  static const std::regex kConversion("Could not convert: (\\S+) = (.*)");
  std::smatch m;
  if (std::regex_match(what, m, kRepeated)) {
    const std::string times = m[2] == "2" ? "twice" : m[2].str() + " times";
    return m[1].str() + " given " + times + " (give it once)";
  }
  if (std::regex_match(what, m, kConversion)) {
    return m[1].str() + ": '" + m[2].str() + "' is not " + expected_value(app, m[1].str());
  }
  return what;
}

// The first of `args` that names an option the command does not have, with the options it
// has that look like it: "unknown option '--seqlen' for dtplan plan (did you mean:
// --seq-len?)". Empty when every option is known (CLI11's message then stands).
std::string unknown_option_message(const std::vector<std::string>& args, const CLI::App& app) {
  if (args.empty()) return "";
  const auto subs =
      app.get_subcommands([&](const CLI::App* c) { return c->get_name() == args.front(); });
  // A command that forwards the options it does not know (dtplan run) has none unknown.
  if (subs.empty() || subs.front()->get_allow_extras()) return "";
  std::vector<std::string> known;
  for (const auto* command : {&app, subs.front()}) {
    for (const auto* o : command->get_options()) {
      for (const auto& name : o->get_lnames())
        known.push_back("--" + name);
    }
  }
  for (std::size_t i = 1; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a.rfind("--", 0) != 0 || a.size() < 3) continue;
    const auto name = a.substr(0, a.find('='));
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    const auto near = close_names(name, known, 3);
    return "unknown option '" + name + "' for dtplan " + args.front() +
           (near.empty() ? std::string() : " (did you mean: " + join(near, ", ") + "?)") +
           " (see dtplan " + args.front() + " --help)";
  }
  return "";
}

// The help that explains a parse error: the command's own when the line names one.
std::string help_command(const std::vector<std::string>& args,
                         const std::map<std::string, CommandRunner>& runners) {
  if (!args.empty() && runners.count(args.front()) > 0) return "dtplan " + args.front() + " --help";
  return "dtplan --help";
}

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{"dtplan: plan distributed training: memory, communication, strategy"};
  app.set_version_flag("--version", std::string("dtplan ") + DTPLAN_VERSION);
  app.require_subcommand(1);
  std::map<std::string, CommandRunner> runners;
  auto add = [&](Command (*reg)(CLI::App&)) {
    auto command = reg(app);
    runners[command.name] = std::move(command.run);
  };
  add(register_memory_command);
  add(register_models_command);
  add(register_gpus_command);
  add(register_topo_command);
  add(register_comm_command);
  add(register_estimate_command);
  add(register_plan_command);
  add(register_run_command);
  add(register_validate_command);
  add(register_calibrate_command);
  add(register_accuracy_command);
  add(register_autotune_command);

  if (!args.empty() && !args.front().empty() && args.front()[0] != '-' &&
      runners.count(args.front()) == 0) {
    std::vector<std::string> names;
    names.reserve(runners.size());
    for (const auto& [name, runner] : runners)
      names.push_back(name);
    err << "dtplan: error: " << unknown_name_message("command", args.front(), names) << '\n';
    return 2;
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
      return app.exit(e, out, err);
    if (const auto unknown = unknown_option_message(args, app); !unknown.empty()) {
      err << "dtplan: error: " << unknown << '\n';
      return 2;
    }
    err << "dtplan: error: " << parse_error_message(e, app) << " (see "
        << help_command(args, runners) << ")\n";
    return 2;
  }
  try {
    for (auto* sub : app.get_subcommands()) {
      return runners.at(sub->get_name())(RunContext{out, err, args});
    }
  } catch (const runtime::Interrupted& e) {
    err << "dtplan: " << e.what() << '\n';
    return e.exit_code();
  } catch (const Error& e) {
    err << "dtplan: error: " << rendered(e, flag_of) << '\n';
    return 1;
  } catch (const std::exception& e) {
    err << "dtplan: internal error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}

}  // namespace dtplan::cli
