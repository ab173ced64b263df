#!/usr/bin/env bash
# Replaces one running compose service with no gap in service: the new container (new image
# or new environment, as compose.yaml now resolves) starts beside the old one, and the old one
# is stopped only once the new one is healthy. Both answer to the service's name meanwhile,
# and the gateway's gRPC clients move to the new one when the old one drains and closes
# (they re-resolve the name and retry UNAVAILABLE).
#
#   deploy/docker/swap.sh SERVICE [compose options...]
#   e.g. RAGRAIL_EMBEDDER_BACKEND=onnx RAGRAIL_EMBEDDER_MODEL=/app/models/embedder/int8 \
#        deploy/docker/swap.sh embedder
#
# `docker compose up -d --no-deps --build SERVICE` does the same job with a gap: it stops
# the old container before the new one has loaded its model. For stateless services only
# (embedder, reranker, generator, guardrails, gateway); the cpu profile's retriever owns a
# Milvus Lite file that two containers cannot share. COMPOSE overrides the compose command
# (default `docker compose`); options after SERVICE go to every compose call (-p, -f).
set -euo pipefail
service="${1:?usage: swap.sh SERVICE [compose options...]}"
shift
read -r -a compose <<<"${COMPOSE:-docker compose}"
compose+=("$@")
timeout_s="${SWAP_TIMEOUT_S:-600}"

old="$("${compose[@]}" ps -q "$service")"
[ "$(echo "$old" | wc -w)" -eq 1 ] || {
  echo "swap: expected one running $service container, found: ${old:-none}" >&2
  exit 1
}
start=$(date +%s)
"${compose[@]}" up -d --no-deps --build --no-recreate --scale "$service=2" "$service" >&2
new="$("${compose[@]}" ps -q "$service" | grep -vx "$old")"
echo "swap: $service: new container ${new:0:12} beside ${old:0:12}" >&2
while :; do
  health="$(docker inspect -f '{{.State.Health.Status}}' "$new")"
  [ "$health" = healthy ] && break
  if [ "$health" = unhealthy ] || [ $(($(date +%s) - start)) -gt "$timeout_s" ]; then
    echo "swap: new $service container is $health; keeping the old one" >&2
    docker rm -f "$new" >/dev/null
    exit 1
  fi
  sleep 1
done
healthy=$(($(date +%s) - start))
# SIGTERM: the old server refuses new calls, drains those in flight, then exits.
docker stop -t 30 "$old" >/dev/null
docker rm "$old" >/dev/null
echo "swap: $service healthy after ${healthy}s, old container gone after $(($(date +%s) - start))s" >&2
