#!/usr/bin/env bash
# Builds a local stand-in for the official Python base image, for machines that reach Debian's
# packages but no container registry (this project's CI). The images default to
# python:3.11.7-slim-bookworm; with the stand-in, build them with
#   --build-arg PYTHON_IMAGE=ragrail-python:standin   (make compose-up does that by itself
#   when the official image can be neither found nor pulled).
#
#   deploy/docker/standin-base.sh [IMAGE_NAME] [PYTHON]   (root; needs debootstrap and dockerd)
#
# Like the official image: Debian 12 (minbase) with a CPython built from source in /usr/local,
# here the interpreter PYTHON runs on (default: .venv's, i.e. the one the project is tested
# on, 3.11.7 on this project's machines), its compiled standard library without tests, and the shared
# libraries its modules load. Debian's own python3 (3.11.2) is too old for some pinned
# packages (soupsieve needs >= 3.11.5), and is used only when PYTHON is Debian's own.
# Also in the image: libgomp1 (llama.cpp's OpenMP runtime, which the generator image would
# otherwise fetch with apt-get) and the host's CA certificates (an HTTPS proxy that only the
# host trusts may sit between a build and PyPI).
set -euo pipefail
cd "$(dirname "$0")/../.."

name="${1:-ragrail-python:standin}"
python="${2:-.venv/bin/python}"
if docker image inspect "$name" >/dev/null 2>&1; then
  echo "$name exists"
  exit 0
fi
read -r prefix version < <("$python" -c \
  'import sys; print(sys.base_prefix, "%d.%d" % sys.version_info[:2])')
# The Debian mirror apt already uses here (deb822 or one-line sources).
mirror="$(grep -rhE '^[[:space:]]*(URIs:|deb )' /etc/apt/sources.list.d/ /etc/apt/sources.list 2>/dev/null \
  | grep -oE 'https?://[^ ]+/debian/?$' | head -n 1 || true)"
mirror="${mirror:-http://deb.debian.org/debian}"
# What CPython's extension modules link against (python:3.11-slim-bookworm carries the same).
packages=ca-certificates,libgomp1,libssl3,libsqlite3-0,libffi8,libbz2-1.0,liblzma5,zlib1g
packages+=,libreadline8,libncursesw6,libuuid1,libexpat1,libgdbm6,libnsl2,libtirpc3
if [ "$prefix" = /usr ]; then
  packages+=,python3,python3-venv
fi
rootfs="$(mktemp -d)"
trap 'rm -rf "$rootfs" "$rootfs.log"' EXIT
debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" "$mirror" \
  >"$rootfs.log" 2>&1 || { tail -n 20 "$rootfs.log" >&2; exit 1; }
if [ "$prefix" != /usr ]; then
  stdlib="lib/python$version"
  mkdir -p "$rootfs/usr/local/bin" "$rootfs/usr/local/$stdlib"
  cp -a "$prefix/bin/python$version" "$rootfs/usr/local/bin/"
  cp -a "$prefix"/lib/libpython"$version"*.so* "$rootfs/usr/local/lib/" 2>/dev/null || true
  tar -C "$prefix/$stdlib" \
    --exclude=./site-packages --exclude=./test --exclude=./idlelib --exclude=./tkinter \
    --exclude=./turtledemo --exclude='*.opt-[12].pyc' -c . | tar -C "$rootfs/usr/local/$stdlib" -x
  mkdir -p "$rootfs/usr/local/$stdlib/site-packages"
  ln -sf "python$version" "$rootfs/usr/local/bin/python3"
  ln -sf "python$version" "$rootfs/usr/local/bin/python"
  chroot "$rootfs" /sbin/ldconfig
  # Bytecode for anything the host had not compiled: the images run with
  # PYTHONDONTWRITEBYTECODE=1, and without it every start recompiles what it imports (seconds
  # for `import grpc` in a healthcheck).
  chroot "$rootfs" "/usr/local/bin/python$version" -m compileall -q -j 0 "/usr/local/$stdlib" >/dev/null || true
  chroot "$rootfs" /usr/local/bin/python3 -c 'import ssl, sqlite3, ctypes, venv, ensurepip'
else
  ln -sf python3 "$rootfs/usr/bin/python"
fi
# Trust what the host trusts: its local CAs, then the whole bundle.
cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/" 2>/dev/null || true
cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["python3"]' \
  - "$name" >/dev/null
echo "built $name ($("$python" --version) from $prefix)"
