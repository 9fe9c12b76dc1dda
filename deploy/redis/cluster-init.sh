#!/bin/sh
# Make a Redis Cluster of the nodes named on the command line (HOST:PORT ...), one replica
# for each master, once: a cluster whose slots are already assigned is left as it is. Exits
# when the cluster answers cluster_state:ok.
set -eu

if [ "$#" -lt 6 ]; then
    echo "usage: cluster-init.sh HOST:PORT ... (six or more: masters and their replicas)" >&2
    exit 2
fi

info() {
    redis-cli -h "$1" -p "$2" cluster info | tr -d '\r'
}

# CLUSTER MEET takes addresses, not names: wait for each node, then look its address up.
addresses=""
for node in "$@"; do
    host=${node%:*}
    port=${node##*:}
    until redis-cli -h "$host" -p "$port" ping 2>/dev/null | grep -q PONG; do
        sleep 1
    done
    address=$(getent hosts "$host" | cut -d' ' -f1)
    addresses="$addresses $address:$port"
done

first=${1%:*}
port=${1##*:}
if info "$first" "$port" | grep -q '^cluster_slots_assigned:0$'; then
    # shellcheck disable=SC2086  # one word per node
    redis-cli --cluster create $addresses --cluster-replicas 1 --cluster-yes
else
    echo "the cluster exists already"
fi

until info "$first" "$port" | grep -q '^cluster_state:ok$'; do
    sleep 1
done
echo "cluster ok:$addresses"
