#!/usr/bin/env bash
# Install Debian's PostgreSQL server package if no server is installed yet.
# eventlake runs its own cluster on a data folder of its own (eventlake postgres start);
# this only provides the binaries (/usr/lib/postgresql/<version>/bin).
set -euo pipefail

if compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" > /dev/null; then
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo > /dev/null && sudo -n true 2> /dev/null; then
  SUDO="sudo -n"
else
  echo "[EL-POSTGRES-001] No PostgreSQL server is installed and this user cannot install one." >&2
  echo "  Expected: Debian's postgresql package (/usr/lib/postgresql/*/bin/pg_ctl)." >&2
  echo "  Fix: as root, run: apt-get install -y postgresql" >&2
  exit 1
fi

echo "Installing Debian's postgresql package..."
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends postgresql > /dev/null
compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" > /dev/null
