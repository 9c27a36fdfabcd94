# Sourced (not run) by scripts/cloud-test.sh and scripts/cloud-load.sh: a PostgreSQL server of the script's own,
# from Debian's postgresql package: initdb into a private folder, a Unix socket only (no TCP port), stopped and
# removed when the script exits. PostgreSQL refuses to run as root, so as root it runs as the package's user.
#
#   postgres_start WORK   starts it in WORK/data (WORK: a new folder); sets postgres_url (a database URL of the
#                         superuser `replenish` and the database `postgres`, over the socket in WORK)
#   postgres_stop         stops it (the EXIT trap postgres_start sets calls it)

postgres_start() {
  postgres_work=$1
  postgres_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  postgres_as=()
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$postgres_work"
    postgres_as=(runuser -u postgres --)
  fi
  trap postgres_stop EXIT
  "${postgres_as[@]}" "$postgres_bin/initdb" -D "$postgres_work/data" -U replenish -A trust --no-sync \
    >"$postgres_work/initdb.log" 2>&1 || { cat "$postgres_work/initdb.log" >&2; return 1; }
  "${postgres_as[@]}" "$postgres_bin/pg_ctl" -D "$postgres_work/data" -l "$postgres_work/server.log" -w -t 60 \
    -o "-c listen_addresses='' -k $postgres_work -p 5432 -c fsync=off -c max_connections=200" start >/dev/null ||
    { cat "$postgres_work/server.log" >&2; return 1; }
  postgres_url="postgres://replenish@localhost/postgres?host=$postgres_work"
}

postgres_stop() {
  [ -n "${postgres_work:-}" ] || return 0
  [ -n "${postgres_on_stop:-}" ] && "$postgres_on_stop"
  "${postgres_as[@]}" "$postgres_bin/pg_ctl" -D "$postgres_work/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$postgres_work"
  postgres_work=""
}
