#!/usr/bin/env bash
# Debian packages the tests use: PostgreSQL (the production store) and Chromium (browser tests).
# As root, installs what is missing; otherwise says what to install and lets the suites that need them skip.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
{ ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; } || need+=(postgresql)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${need[*]} from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
  echo "note: ${need[*]} missing and not root; suites that need them will be skipped" >&2
fi
