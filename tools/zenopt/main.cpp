//===- main.cpp - the zenopt command-line tool -----------------------------===//
#include "Command.h"

#include <iostream>
#include <vector>

namespace zen::cli {
namespace {
struct RegisteredCommand {
  std::string name;
  std::string description;
  CommandSetup setup;
};

std::vector<RegisteredCommand> &registry() {
  static std::vector<RegisteredCommand> commands;
  return commands;
}
} // namespace

CommandRegistration::CommandRegistration(const char *name, const char *description,
                                         CommandSetup setup) {
  registry().push_back({name, description, std::move(setup)});
}

int reportError(const std::string &message, int exitCode) {
  std::cerr << "zenopt: error: " << message << "\n";
  return exitCode;
}
} // namespace zen::cli

int main(int argc, char **argv) {
  using namespace zen::cli;
  CLI::App app{"zenopt: plans the communication of distributed training and inference"};
  app.set_version_flag("--version", "zenopt 0.1.0");
  app.require_subcommand(0, 1);

  std::function<int()> defaultAction;
  std::vector<std::pair<CLI::App *, std::function<int()>>> actions;
  // Deterministic order regardless of static-initialisation order.
  std::vector<RegisteredCommand> commands = registry();
  std::sort(commands.begin(), commands.end(),
            [](const RegisteredCommand &a, const RegisteredCommand &b) { return a.name < b.name; });
  for (RegisteredCommand &command : commands) {
    if (command.name.empty()) {
      defaultAction = command.setup(app);
      continue;
    }
    CLI::App *sub = app.add_subcommand(command.name, command.description);
    actions.emplace_back(sub, command.setup(*sub));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &) {
    std::cout << app.help();
    return ExitSuccess;
  } catch (const CLI::CallForAllHelp &) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return ExitSuccess;
  } catch (const CLI::CallForVersion &) {
    std::cout << "zenopt 0.1.0\n";
    return ExitSuccess;
  } catch (const CLI::ParseError &error) {
    std::cerr << "zenopt: error: " << error.what() << "\n"
              << "Run with --help for more information.\n";
    return ExitUsage;
  }

  try {
    for (auto &[sub, action] : actions)
      if (sub->parsed())
        return action();
    if (defaultAction)
      return defaultAction();
    std::cerr << app.help();
    return ExitUsage;
  } catch (const CommandError &error) {
    return reportError(error.what(), error.exitCode);
  } catch (const std::exception &error) {
    return reportError(std::string("internal error: ") + error.what(), ExitSoftware);
  }
}
