#!/usr/bin/env bash
# Install Debian's PostgreSQL server package if no server is installed yet.
# eventlake runs its own cluster on a data folder of its own (eventlake postgres start);
# this only provides the binaries. eventlake finds them as this script looks for them:
# EVENTLAKE_PG_BIN, `pg_config --bindir`, pg_ctl on PATH, /usr/lib/postgresql/*/bin.
set -euo pipefail

found() {
  [[ -n "${EVENTLAKE_PG_BIN:-}" && -x "$EVENTLAKE_PG_BIN/pg_ctl" ]] && return 0
  command -v pg_config > /dev/null && [[ -x "$(pg_config --bindir)/pg_ctl" ]] && return 0
  command -v pg_ctl > /dev/null && return 0
  compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" > /dev/null
}

found && exit 0
EL_CODE=EL-POSTGRES-001 bash "$(dirname "$0")/apt-install.sh" postgresql
found
