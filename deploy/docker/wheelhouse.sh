#!/usr/bin/env bash
# Fills deploy/docker/wheels/ with a wheel of every package the images install, built or
# fetched by this machine's pip (the venv's, under constraints.txt, as `make install` does).
# The images then install from it with --no-index: no PyPI and no compiler inside a build,
# CPU torch from wherever this pip finds it, and llama-cpp-python from the wheel `make
# install` built (deploy/llama-cpp-wheel.sh) instead of a second compile.
#
#   deploy/docker/wheelhouse.sh [PYTHON]        (default .venv/bin/python)
#
# torch: this pip must resolve torch==2.13.0 to the CPU build, or a CPU image would pull
# several GB of CUDA packages. Where it does not by itself (a find-links holding
# torch-2.13.0+cpu, as on this project's machines), run with
#   PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
# The script refuses a wheelhouse holding nvidia-* wheels.
# llama-cpp-python: pip compiles it for the build machine's CPU unless told otherwise; for
# images meant for other hosts set CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON
# -DGGML_F16C=ON" (and clear pip's cached wheel) first.
set -euo pipefail
cd "$(dirname "$0")/../.."
python="${1:-.venv/bin/python}"
out=deploy/docker/wheels
stamp="$out/.complete"
inputs=(pyproject.toml constraints.txt deploy/docker/requirements.py)
if [ -f "$stamp" ] && [ -z "$(find "${inputs[@]}" -newer "$stamp")" ]; then
  echo "wheelhouse up to date ($(find "$out" -name '*.whl' | wc -l) wheels)"
  exit 0
fi
requirements="$(mktemp)"
trap 'rm -f "$requirements"' EXIT
{ "$python" deploy/docker/requirements.py core; "$python" deploy/docker/requirements.py all; } >"$requirements"
# llama-cpp-python from the wheel `make install` built (deploy/llama-cpp-wheel.sh), not a
# second compile.
# A --find-links option adds to pip's configured ones; PIP_FIND_LINKS would replace them (and
# with them a configured find-links that holds torch's CPU build, as on this project's machines).
llama=(--find-links "$(deploy/llama-cpp-wheel.sh --dir "$python")")
pip=("$python" -m pip --disable-pip-version-check)
# torch first and alone, so it is the CPU wheel whatever the resolver would prefer.
"${pip[@]}" wheel -q -w "$out" -c constraints.txt --no-deps torch==2.13.0
"${pip[@]}" wheel -q -w "$out" "${llama[@]}" -c constraints.txt -r "$requirements"
"$python" deploy/docker/requirements.py --no-deps all \
  | "${pip[@]}" wheel -q -w "$out" "${llama[@]}" -c constraints.txt --no-deps -r /dev/stdin
if ls "$out" | grep -q '^nvidia_'; then
  echo "$out holds CUDA wheels (nvidia-*): this pip resolved torch to the CUDA build;" \
    "see the top of $0" >&2
  exit 1
fi
touch "$stamp"
echo "wheelhouse: $(find "$out" -name '*.whl' | wc -l) wheels, $(du -sh "$out" | cut -f1)"
