// `hooprun --check-build`: what this build of hoop can do, horovodrun --check-build style.
#pragma once

#include <string>

namespace hoop::launch {

/// The report: version, then transports, adapters and launchers, each "[X] name  (detail)"
/// when usable here or "[ ] name  (why not)".
std::string check_build_report();

/// hoop's version ("0.1.0"), as --check-build and --version print it.
std::string version_text();

}  // namespace hoop::launch
