// `hooprun --check-build`: what this build of hoop can do, horovodrun --check-build style.
#pragma once

#include <string>

namespace hoop::launch {

/// The report: version, then transports, adapters and launchers, each "[X] name  (detail)"
/// when usable here or "[ ] name  (why not)".
std::string check_build_report();

/// hoop's version ("0.1.0"), as --check-build and --version print it.
std::string version_text();
/// The Python interpreter this build's `hoop` package was built for (HOOP_PYTHON).
std::string built_python();
/// The folder holding the `hoop` package that goes with this hooprun (build/python beside
/// build/bin, an installed prefix's lib/python3/dist-packages, pip's site-packages), or empty
/// where there is none.
std::string python_package_dir();

}  // namespace hoop::launch
