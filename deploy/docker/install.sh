#!/bin/sh
# Inside an image build (deploy/docker/Dockerfile): pip-installs one part of the project into
# /opt/venv, pinned by constraints.txt. PART is an extra of pyproject.toml (a service), `core`
# (what every service shares) or a package constraints.txt pins (`torch`).
#
#   sh /ctx/deploy/docker/install.sh PART        (/ctx: pyproject.toml, constraints.txt,
#                                                 deploy/docker/ of the build context)
#
# With wheels in deploy/docker/wheels (deploy/docker/wheelhouse.sh) nothing is downloaded and
# nothing compiled: --no-index. Without, packages come from PyPI and torch from PyTorch's CPU
# index (PyPI's torch pulls several GB of CUDA libraries), and llama-cpp-python, which has
# no wheel on PyPI, is compiled with a compiler installed and removed in the same layer.
set -eu
part="$1"
ctx=/ctx
wheels="$ctx/deploy/docker/wheels"
requirements="$(mktemp)"
python "$ctx/deploy/docker/requirements.py" "$part" >"$requirements"
no_deps="$(python "$ctx/deploy/docker/requirements.py" --no-deps "$part")"

if ls "$wheels"/*.whl >/dev/null 2>&1; then
  set -- --no-index --find-links "$wheels"
else
  # torch==X matches X+cpu on this index, and pip takes X+cpu as the newer.
  set -- --extra-index-url https://download.pytorch.org/whl/cpu
  if grep -q '^llama-cpp-python==' "$requirements"; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends build-essential cmake >/dev/null
    compiler=installed
    # Not -march=native: the image may run on another CPU than the one that built it.
    # No multimodal (mtmd) library: nothing here loads it (deploy/llama-cpp-wheel.sh).
    export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF"
  fi
fi
pip install --no-cache-dir "$@" -c "$ctx/constraints.txt" -r "$requirements"
if [ -n "$no_deps" ]; then
  # shellcheck disable=SC2086  # one requirement a word
  pip install --no-cache-dir "$@" --no-deps -c "$ctx/constraints.txt" $no_deps
fi
if [ "${compiler:-}" = installed ]; then
  apt-get purge -y -qq --auto-remove build-essential cmake >/dev/null
  rm -rf /var/lib/apt/lists/*
fi
rm -f "$requirements"
