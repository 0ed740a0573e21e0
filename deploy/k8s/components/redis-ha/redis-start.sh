#!/bin/sh
# A data pod of the Redis failover group (components/redis-ha). Asks the sentinels which node
# is the primary and starts as its replica, or as the primary when it is that node; with no
# sentinel answering (the group's first start) redis-0 is the primary. Every node announces
# its stable DNS name, so the sentinels follow pods across IP changes. Its arguments (the
# container's: config file, --requirepass, --maxmemory) are redis-server's.
set -eu
me="$(hostname).redis-nodes"
primary=""
for i in 0 1 2; do
  answer="$(timeout 3 redis-cli -h "redis-sentinel-$i.redis-sentinel" -p 26379 \
    sentinel get-master-addr-by-name loopgate 2>/dev/null | head -n 1)" || answer=""
  case "$answer" in
    ""|*ERR*|*NOAUTH*|*WRONGPASS*) ;;
    *) primary="$answer"; break ;;
  esac
done
[ -n "$primary" ] || primary="redis-0.redis-nodes"
set -- "$@" --masterauth "$REDIS_PASSWORD" --replica-announce-ip "$me"
if [ "$primary" != "$me" ]; then
  set -- "$@" --replicaof "$primary" 6379
fi
exec redis-server "$@"
