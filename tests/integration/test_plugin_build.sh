#!/usr/bin/env bash
# test_plugin_build.sh BUILD_DIR - a plugin builds outside eddy's tree from
# the installed API alone: `cmake --install` into a temporary prefix, then
# examples/Makefile compiles both example plugins with only
# `pkg-config --cflags eddy` (and jansson's), and the installed eddy plans
# their jobs with --plugin. Also: a plugin of another ABI is refused.
set -euo pipefail
BUILD="$1"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail() { echo "test_plugin_build: FAIL: $*" >&2; exit 1; }

cmake --install "$BUILD" --prefix "$TMP/prefix" >/dev/null
pc="$(find "$TMP/prefix" -name eddy.pc | head -1)"
[[ -n "$pc" ]] || fail "no eddy.pc installed"
export PKG_CONFIG_PATH="$(dirname "$pc")"
cp -r "$ROOT/examples" "$TMP/examples"
make -s -C "$TMP/examples" || fail "the examples do not build against the installed API"
EDDY="$TMP/prefix/bin/eddy"
"$EDDY" plan --plugin "$TMP/examples/libclicks.so" --job clicks --input in.txt --output out.tsv \
  | grep -q "by key (clicks_user), rescalable" || fail "eddy plan --plugin libclicks.so"
"$EDDY" plan --plugin "$TMP/examples/libjson_filter.so" --job json_filter --input in.jsonl \
  --field type --equals click --output-dir out --json | grep -q '"json_filter_project"' \
  || fail "eddy plan --plugin libjson_filter.so"
if out="$("$EDDY" plan --plugin "$BUILD/test-plugins/libtest_plugin_bad_abi.so" --job x 2>&1)"; then
  fail "a plugin of another ABI was accepted"
fi
grep -q "was built for eddy ABI" <<<"$out" || fail "unclear ABI error: $out"
echo "test_plugin_build: 3 passed, 0 failed"
