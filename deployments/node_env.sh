# Sourced by the cluster configs' start commands on every node, before `ray start` and
# `serve deploy` (cluster.yaml, deployments/cluster.local.yaml):
#
#   . ~/troupe-src/deployments/node_env.sh && ~/troupe-venv/bin/ray start ...
#
# 1. The open-files limit: 65536 (one Ray worker process per actor, each with its sockets),
#    else as high as the node's hard limit allows, said on stderr, which `ray up` prints; below
#    8192 the start fails, naming the account and the host to fix.
# 2. Every line of ~/.troupe/env (mode 600: API keys, provider keys, TROUPE_LLM_CONFIG) is
#    exported, so that Ray's processes, and the actors they start, see them; then those of
#    ~/.troupe/services.env, which deployments/head_services.sh writes on the head (where the
#    state store and the Chroma server are, and the store's password).
# 3. With `--head` (`. node_env.sh --head`, before `ray start --head`): when ~/.troupe/env sets
#    TROUPE_GCS_REDIS (host:port of a Redis that outlives the head; its password in
#    TROUPE_GCS_REDIS_PASSWORD), Ray's GCS keeps its tables there (RAY_REDIS_ADDRESS, under
#    the namespace TROUPE_GCS_NAMESPACE, default raytroupe): a GCS that dies comes back with
#    the cluster's actors, jobs and nodes. The start command passes the password.

troupe_nofile_want=65536
troupe_nofile_floor=8192
if ! ulimit -n "$troupe_nofile_want" 2>/dev/null; then
    ulimit -n "$(ulimit -Hn)" 2>/dev/null
    troupe_nofile=$(ulimit -n)
    if [ "$troupe_nofile" -lt "$troupe_nofile_floor" ]; then
        echo "raytroupe: the open-files limit of $(id -un) on $(hostname) is $troupe_nofile" \
            "(hard limit), below $troupe_nofile_floor: raise nofile (e.g. in" \
            "/etc/security/limits.conf) to $troupe_nofile_want" >&2
        return 1 2>/dev/null || exit 1
    fi
    echo "raytroupe: warning: the open-files limit of $(id -un) on $(hostname) is" \
        "$troupe_nofile (its hard limit), below $troupe_nofile_want: Ray runs with it; raise" \
        "nofile for clusters of many actors" >&2
fi
if [ -f ~/.troupe/env ]; then
    set -a
    . ~/.troupe/env || { echo "raytroupe: ~/.troupe/env on $(hostname) failed to load" >&2; return 1 2>/dev/null || exit 1; }
    set +a
fi
if [ -f ~/.troupe/services.env ]; then
    set -a
    . ~/.troupe/services.env || { echo "raytroupe: ~/.troupe/services.env on $(hostname) failed to load" >&2; return 1 2>/dev/null || exit 1; }
    set +a
fi
if [ "${1:-}" = "--head" ] && [ -n "${TROUPE_GCS_REDIS:-}" ]; then
    export RAY_REDIS_ADDRESS="$TROUPE_GCS_REDIS"
    export RAY_external_storage_namespace="${TROUPE_GCS_NAMESPACE:-raytroupe}"
    echo "raytroupe: the GCS keeps its tables in Redis at $TROUPE_GCS_REDIS" >&2
fi
true
