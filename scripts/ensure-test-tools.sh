#!/usr/bin/env bash
# Debian's packages the tests use, installed when missing: promtool (package prometheus)
# checks the shipped alert rules; chromium loads the live dashboard headless;
# systemd-analyze (package systemd) verifies the shipped systemd unit; libjemalloc2 is the
# driver JVM's allocator under spark.allocator: jemalloc.
set -euo pipefail

missing=()
command -v promtool > /dev/null || missing+=(prometheus)
command -v chromium > /dev/null || missing+=(chromium)
command -v systemd-analyze > /dev/null || missing+=(systemd)
jemalloc() { /sbin/ldconfig -p | grep 'libjemalloc\.so\.2 ' > /dev/null; }
jemalloc || missing+=(libjemalloc2)
[ ${#missing[@]} -eq 0 ] && exit 0

bash "$(dirname "$0")/apt-install.sh" "${missing[@]}"
command -v promtool > /dev/null && command -v chromium > /dev/null \
  && command -v systemd-analyze > /dev/null && jemalloc
