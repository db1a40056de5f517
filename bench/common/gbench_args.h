// Command-line handling for the Google Benchmark programs, so they answer as every other hoop
// program does: --help says what the program measures before Google Benchmark's flags, --version
// prints hoop's version line, and an unknown flag is a usage error with exit status 2 (Google
// Benchmark's own answer is its bare flag list, and status 1).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "hoop/version.h"

namespace hoop::bench {

namespace detail {
// Initialize takes a help printer without arguments: the program's text waits here for it.
inline std::string& gbench_help_text() {
  static std::string text;
  return text;
}
inline void print_gbench_help() {
  std::fputs(detail::gbench_help_text().c_str(), stdout);
  benchmark::PrintDefaultHelp();
}
}  // namespace detail

/// Parses argv for the Google Benchmark program `name`, whose --help starts with `about` (what it
/// measures and an example command): nullopt to go on and run the benchmarks, else the status to
/// exit with (0 after --version, 2 after an unknown flag; --help exits 0 inside Google Benchmark).
inline std::optional<int> parse_gbench_args(int* argc, char** argv, std::string_view name,
                                            std::string_view about) {
  if (*argc > 1 && std::string_view(argv[1]) == "--version") {
    std::puts(hoop::version_line(std::string(name)).c_str());
    return 0;
  }
  detail::gbench_help_text() = "usage: " + std::string(name) + " [options]\n" +
                               std::string(about) + "\noptions (Google Benchmark's):\n";
  benchmark::Initialize(argc, argv, detail::print_gbench_help);
  if (benchmark::ReportUnrecognizedArguments(*argc, argv)) {
    std::fprintf(stderr, "run with --help for the options\n");
    return 2;
  }
  return std::nullopt;
}

}  // namespace hoop::bench
