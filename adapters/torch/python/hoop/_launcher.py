"""The `hooprun` command of a pip-installed hoop: runs the hooprun executable installed inside
the package (hoop/bin/hooprun, which finds libhoop next to the extension)."""

import os
import sys


def executable():
    """The path of the packaged hooprun executable."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "hooprun")


def main():
    """Replaces this process with hooprun and the command-line arguments given."""
    path = executable()
    if not os.access(path, os.X_OK):
        sys.exit(f"hooprun: {path} is missing: this hoop package was not installed by pip "
                 "(in a source tree, run build/bin/hooprun)")
    os.execv(path, [path] + sys.argv[1:])
