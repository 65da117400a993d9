#!/usr/bin/env bash
# .ci/redis.sh DIR: start a standalone Redis and a Redis Cluster of 3 masters
# with one replica each on free loopback ports, with their data and logs in
# DIR. Prints the variables the tests read (SMS_TEST_REDIS_ADDR,
# SMS_TEST_REDIS_CLUSTER: all 6 nodes) and writes the server pids to DIR/pids,
# one per line; `.ci/redis.sh stop DIR` stops them.
#
# The cluster is ready for a failover when this returns: every node reports
# cluster_state:ok and every master has a replica that finished its sync.
# cluster-node-timeout is 2s, so a master that stops answering is replaced
# by its replica within a few seconds (admission/failover_test.go), and a
# node slowed by a busy machine is not taken for dead.
set -euo pipefail

if [ "${1:-}" = stop ]; then
  dir=$2
  [ -f "$dir/pids" ] || exit 0
  # SIGCONT too: a node a failover test left frozen (SIGSTOP) ends only then.
  while read -r pid; do kill "$pid" 2>/dev/null || true; kill -CONT "$pid" 2>/dev/null || true; done <"$dir/pids"
  while read -r pid; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true # still there after 5s
  done <"$dir/pids"
  rm -f "$dir/pids"
  exit 0
fi

dir=$1
mkdir -p "$dir"
# Whatever fails from here, the servers already started are stopped.
trap '[ $? = 0 ] || bash "$0" stop "$dir"' EXIT

in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port prints a port whose cluster bus port (+10000) is free too. Both
# lie below the kernel's ephemeral range: there, an outgoing connection (the
# module downloads of the promtool build running beside) can take a port
# between the look and redis-server's bind, and the node fails to start.
ephemeral_low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
span=$((ephemeral_low - 10000 - 10000))
[ "$span" -ge 1000 ] || { echo "the ephemeral port range starts at $ephemeral_low: no room for Redis ports below it" >&2; exit 1; }
free_port() {
  local p
  for _ in $(seq 200); do
    p=$((10000 + RANDOM % span))
    if ! in_use "$p" && ! in_use $((p + 10000)) && ! grep -qx "$p" "$dir/ports" 2>/dev/null; then
      echo "$p" >>"$dir/ports"
      echo "$p"
      return
    fi
  done
  echo "no free loopback port found" >&2
  return 1
}

start() { # start PORT [extra redis-server args...]
  local port=$1
  shift
  mkdir -p "$dir/$port"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$dir/$port" --logfile "$dir/$port/redis.log" "$@" &
  echo $! >>"$dir/pids"
  for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && return
    sleep 0.05
  done
  echo "redis on port $port did not start; log:" >&2
  cat "$dir/$port/redis.log" >&2
  return 1
}

single=$(free_port)
start "$single"

cluster=()
for _ in 1 2 3 4 5 6; do
  p=$(free_port)
  # A full sync goes at once (no wait for more replicas to share it).
  start "$p" --cluster-enabled yes --cluster-config-file "$dir/$p/nodes.conf" --cluster-node-timeout 2000 \
    --repl-diskless-sync-delay 0
  cluster+=("127.0.0.1:$p")
done
redis-cli --cluster create "${cluster[@]}" --cluster-replicas 1 --cluster-yes >"$dir/cluster-create.log" 2>&1 ||
  { cat "$dir/cluster-create.log" >&2; exit 1; }

# ready PORT: the node sees the whole cluster ok and, as a master, has an
# online replica or, as a replica, a live link to its master with no sync in
# progress.
ready() {
  local info repl
  info=$(redis-cli -p "$1" cluster info 2>/dev/null) || return 1
  grep -q 'cluster_state:ok' <<<"$info" && grep -q "cluster_known_nodes:${#cluster[@]}\b" <<<"$info" || return 1
  repl=$(redis-cli -p "$1" info replication 2>/dev/null) || return 1
  if grep -q 'role:master' <<<"$repl"; then
    grep -q '^slave0:.*state=online' <<<"$repl"
  else
    grep -q 'master_link_status:up' <<<"$repl" && grep -q 'master_sync_in_progress:0' <<<"$repl"
  fi
}
for hp in "${cluster[@]}"; do
  for i in $(seq 300); do
    ready "${hp#*:}" && break
    [ "$i" = 300 ] && { echo "cluster node $hp not ready (state ok, replica synced) after 30s" >&2; exit 1; }
    sleep 0.1
  done
done

echo "export SMS_TEST_REDIS_ADDR=127.0.0.1:$single"
echo "export SMS_TEST_REDIS_CLUSTER=$(IFS=,; echo "${cluster[*]}")"
