#!/usr/bin/env bash
# (Re)start this worker node's Ray, and stop all of it when its raylet exits.
#
#   ~/troupe-src/deployments/ray_worker.sh --address=$RAY_HEAD_IP:6379 [more `ray start` flags]
#
# Used by deployments/cluster.local.yaml. `ray down` of a local-provider cluster runs `ray stop`
# on the head only. A worker's raylet exits within 60 s of losing the head's GCS, but the rest of
# the node's Ray (its log monitor) would run on forever. So after `ray start` a small watcher,
# detached from the SSH session, waits for this raylet to exit and then runs `ray stop`. The
# watcher of a previous start is stopped first, so that it never stops the Ray started here.
set -u
ray="$HOME/troupe-venv/bin/ray"
pidfile="$HOME/.troupe/ray-watch.pid"

if [ -f "$pidfile" ]; then
    old=$(cat "$pidfile")
    if [ -n "$old" ] && grep -qs raytroupe-watch "/proc/$old/cmdline"; then
        kill "$old" 2>/dev/null
    fi
    rm -f "$pidfile"
fi
"$ray" stop
"$ray" start "$@" || exit 1
raylet=$(pgrep -n -u "$(id -u)" -x raylet) || {
    echo "raytroupe: ray start returned, and no raylet of $(id -un) runs on $(hostname)" >&2
    exit 1
}
nohup sh -c 'while kill -0 "$1" 2>/dev/null; do sleep 2; done; exec "$2" stop' \
    raytroupe-watch "$raylet" "$ray" </dev/null >/dev/null 2>&1 &
echo "$!" >"$pidfile"
echo "raytroupe: Ray runs on $(hostname); when its raylet ($raylet) exits, ray stop follows"
