#!/usr/bin/env bash
# llama-cpp-python's wheel, built once per version, build flags, Python and CPU, and kept in a
# cache: PyPI publishes no Linux wheel of it, so every fresh install compiles llama.cpp. `make
# install` starts this first, in the background, so the compile runs while everything else
# downloads and installs, then installs the wheel from the printed directory; a later install
# (make clean, .venv-pytriton, the images' wheelhouse) reuses it instead of compiling again.
#
#   deploy/llama-cpp-wheel.sh [PYTHON]          build unless cached; prints the directory
#   deploy/llama-cpp-wheel.sh --dir [PYTHON]    only print the directory
#
# LLAMA_CMAKE_ARGS (default -DLLAVA_BUILD=OFF): llama.cpp's library and the CPU backend for
# this machine (-march=native, llama.cpp's default), without the multimodal (mtmd) library,
# which ragrail never loads. The sdist's CMakeLists forces llama.cpp's `common` library on
# (only mtmd and llama.cpp's own tools use it; the Python bindings load libllama and ggml), so
# the sdist is unpacked and that line set OFF, as upstream already does for its wasm build:
# a third of the compile saved. RAGRAIL_WHEEL_CACHE moves the cache (default ~/.cache/ragrail/wheels).
set -euo pipefail
cd "$(dirname "$0")/.."
only_dir=0
if [ "${1:-}" = "--dir" ]; then only_dir=1; shift; fi
python="${1:-python3}"
version="$(sed -n 's/^llama-cpp-python==//p' constraints.txt)"
flags="${LLAMA_CMAKE_ARGS:--DLLAVA_BUILD=OFF}"
patch='s/set(LLAMA_BUILD_COMMON ON CACHE/set(LLAMA_BUILD_COMMON OFF CACHE/'
# -march=native code must not run on another CPU: the CPU's feature flags are in the key.
key="$( { echo "$version $flags $patch"
          "$python" -c 'import platform, sys; print(sys.version_info[:2], platform.machine())'
          grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m; } | sha256sum | cut -c1-16)"
dir="${RAGRAIL_WHEEL_CACHE:-$HOME/.cache/ragrail/wheels}/llama-cpp-python-$version-$key"
if [ "$only_dir" = 1 ] || ls "$dir"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "$dir"
  exit 0
fi
started=$(date +%s)
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp"
pip=("$python" -m pip --disable-pip-version-check)
"${pip[@]}" download --no-deps --no-binary :all: -d "$dir.tmp/sdist" "llama-cpp-python==$version" >&2
tar xzf "$dir.tmp"/sdist/llama_cpp_python-*.tar.gz -C "$dir.tmp/sdist"
src="$(echo "$dir.tmp"/sdist/llama_cpp_python-*/)"
sed -i "$patch" "$src/CMakeLists.txt"
! grep -q 'set(LLAMA_BUILD_COMMON ON CACHE' "$src/CMakeLists.txt"  # the patch took
CMAKE_ARGS="$flags" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
  "${pip[@]}" wheel --no-deps -w "$dir.tmp" "$src" >&2
rm -rf "$dir.tmp/sdist"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
echo "llama-cpp-python $version compiled in $(( $(date +%s) - started )) s ($flags)" >&2
echo "$dir"
