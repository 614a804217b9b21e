#!/usr/bin/env bash
# apt-get install Debian packages ($@) as root or with passwordless sudo; otherwise say
# what to run, under the error code in $EL_CODE (default EL-TOOLS-001), and fail.
set -euo pipefail

if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo > /dev/null && sudo -n true 2> /dev/null; then
  SUDO="sudo -n"
else
  echo "[${EL_CODE:-EL-TOOLS-001}] Debian's $* is needed and this user cannot install it." >&2
  echo "  Expected: the package(s) $* installed." >&2
  echo "  Fix: as root, run: apt-get install -y --no-install-recommends $*" >&2
  exit 1
fi

echo "Installing Debian's $*..."
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" > /dev/null
