#!/usr/bin/env bash
# Install Debian's PostgreSQL server package if no server is installed yet.
# eventlake runs its own cluster on a data folder of its own (eventlake postgres start);
# this only provides the binaries (/usr/lib/postgresql/<version>/bin).
set -euo pipefail

if compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" > /dev/null; then
  exit 0
fi

EL_CODE=EL-POSTGRES-001 bash "$(dirname "$0")/apt-install.sh" postgresql
compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" > /dev/null
