#!/usr/bin/env bash
# .ci/redis.sh DIR: start a standalone Redis and a 3-master Redis Cluster on
# free loopback ports, with their data and logs in DIR. Prints the variables
# the tests read (SMS_TEST_REDIS_ADDR, SMS_TEST_REDIS_CLUSTER) and writes the
# server pids to DIR/pids, one per line; `.ci/redis.sh stop DIR` stops them.
set -euo pipefail

if [ "${1:-}" = stop ]; then
  dir=$2
  [ -f "$dir/pids" ] || exit 0
  while read -r pid; do kill "$pid" 2>/dev/null || true; done <"$dir/pids"
  while read -r pid; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done <"$dir/pids"
  rm -f "$dir/pids"
  exit 0
fi

dir=$1
mkdir -p "$dir"

in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port prints a port whose cluster bus port (+10000) is free too.
free_port() {
  local p
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 10000))
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
for _ in 1 2 3; do
  p=$(free_port)
  start "$p" --cluster-enabled yes --cluster-config-file "$dir/$p/nodes.conf" --cluster-node-timeout 2000
  cluster+=("127.0.0.1:$p")
done
redis-cli --cluster create "${cluster[@]}" --cluster-replicas 0 --cluster-yes >"$dir/cluster-create.log" 2>&1 ||
  { cat "$dir/cluster-create.log" >&2; exit 1; }
for hp in "${cluster[@]}"; do
  for i in $(seq 100); do
    redis-cli -p "${hp#*:}" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break
    [ "$i" = 100 ] && { echo "cluster node $hp not ok" >&2; exit 1; }
    sleep 0.1
  done
done

echo "export SMS_TEST_REDIS_ADDR=127.0.0.1:$single"
echo "export SMS_TEST_REDIS_CLUSTER=$(IFS=,; echo "${cluster[*]}")"
