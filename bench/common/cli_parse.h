// Command-line parsing with the exit status every hoop program gives a usage error.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>

namespace hoop::bench {

/// Parses argv into `app`: nullopt to go on, else the status to exit with: 0 after --help or
/// --version, 2 after a usage error (printed by CLI11 with its hint), as hooprun and hoop-bench
/// exit (CLI11's own codes, 105-109 by kind, would differ from program to program).
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  return std::nullopt;
}

}  // namespace hoop::bench
