#!/usr/bin/env bash
# Builds Horovod 0.28.1 from PyPI against Debian's python3-torch (gloo CPU operations, no MPI,
# no TensorFlow/MXNet) into a private prefix, for the runtime comparison of
# bench/torch_horovod.sh. Nothing is installed into the project's dependencies or the system
# Python: use it with PYTHONPATH=<prefix>.
#
#   bench/horovod_install.sh [PREFIX]      (default: build-bench/horovod)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prefix="${1:-$here/../build-bench/horovod}"
python=/usr/bin/python3

if PYTHONPATH="$prefix" "$python" -c 'import horovod.torch' 2>/dev/null; then
  echo "horovod_install.sh: Horovod already in $prefix"
  exit 0
fi
# Debian packages the build needs: pip, the Python headers, CMake, a compiler and torch's C++
# headers (libtorch-dev; python3-torch has none).
missing=()
for pkg in python3-pip python3-dev cmake g++ python3-torch libtorch-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
  apt-get install -y --no-install-recommends "${missing[@]}"
fi

mkdir -p "$prefix"
# --no-build-isolation: the build must see Debian's torch (its headers and C++ ABI), which an
# isolated build environment would replace with a PyPI wheel. --no-deps keeps torch out of the
# prefix; Horovod's own small dependencies follow explicitly.
export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1
export HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_CPU_OPERATIONS=gloo
export MAKEFLAGS="-j$(nproc)"
"$python" -m pip install --no-build-isolation --no-deps --no-cache-dir --target "$prefix" \
  horovod==0.28.1
"$python" -m pip install --no-deps --target "$prefix" cloudpickle==3.0.0 psutil==5.9.8 \
  pyyaml==6.0.1 packaging==23.2
PYTHONPATH="$prefix" "$python" -c 'import horovod.torch as hvd; print("horovod", hvd.__version__ if hasattr(hvd, "__version__") else "", "gloo:", hvd.gloo_built())'
