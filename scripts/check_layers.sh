#!/usr/bin/env bash
# check_layers.sh - fails when a layer includes a header of a layer above it.
#
# The layers, lowest first, are DESIGN.md's:
#   common < net < state < api < plan < operators < connectors < runtime <
#   controller < coordinator < jobs < cli
# A file in layer L may include "M/..." only for M at or below L. CMake runs
# this as the test `test_layers`, so CI fails on an upward include.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LAYERS=(common net state api plan operators connectors runtime controller coordinator jobs cli)
declare -A RANK
for i in "${!LAYERS[@]}"; do RANK[${LAYERS[$i]}]=$i; done

bad=0
for layer in "${LAYERS[@]}"; do
  [[ -d "$ROOT/$layer" ]] || continue
  while IFS= read -r -d '' file; do
    while IFS= read -r line; do
      inc="${line#*\"}"; inc="${inc%%\"*}"
      dep="${inc%%/*}"
      [[ "$inc" == */* && -n "${RANK[$dep]+x}" ]] || continue
      if (( RANK[$dep] > RANK[$layer] )); then
        echo "check_layers: ${file#$ROOT/} includes \"$inc\": $layer may not include $dep (a higher layer)" >&2
        bad=1
      fi
    done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" || true)
  done < <(find "$ROOT/$layer" -type f \( -name '*.c' -o -name '*.h' \) -print0)
done
# Example plugins are written against the installed API only.
if [[ -d "$ROOT/examples" ]]; then
  while IFS= read -r -d '' file; do
    while IFS= read -r line; do
      inc="${line#*\"}"; inc="${inc%%\"*}"
      if [[ "$inc" != api/* ]]; then
        echo "check_layers: ${file#$ROOT/} includes \"$inc\": examples may include api/ headers only" >&2
        bad=1
      fi
    done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" || true)
  done < <(find "$ROOT/examples" -type f \( -name '*.c' -o -name '*.h' \) -print0)
fi
if ((bad)); then
  echo "check_layers: upward includes found (layers: ${LAYERS[*]})" >&2
  exit 1
fi
echo "check_layers: ${#LAYERS[@]} layers, no upward include"
