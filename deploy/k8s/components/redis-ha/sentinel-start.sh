#!/bin/sh
# A Redis Sentinel of the failover group (components/redis-ha). Writes its config into its
# own volume on every start (the sentinel rewrites the file as it learns the group) and
# monitors the primary the other sentinels name, or redis-0 on the group's first start.
set -eu
me="$(hostname).redis-sentinel"
primary=""
for i in 0 1 2; do
  peer="redis-sentinel-$i.redis-sentinel"
  [ "$peer" != "$me" ] || continue
  answer="$(timeout 3 redis-cli -h "$peer" -p 26379 \
    sentinel get-master-addr-by-name loopgate 2>/dev/null | head -n 1)" || answer=""
  case "$answer" in
    ""|*ERR*|*NOAUTH*|*WRONGPASS*) ;;
    *) primary="$answer"; break ;;
  esac
done
[ -n "$primary" ] || primary="redis-0.redis-nodes"
conf="${SENTINEL_CONF:-/data/sentinel.conf}"
umask 077
cat > "$conf" <<CONF
port 26379
sentinel resolve-hostnames yes
sentinel announce-hostnames yes
sentinel announce-ip $me
requirepass $REDIS_PASSWORD
sentinel sentinel-pass $REDIS_PASSWORD
sentinel monitor loopgate $primary 6379 2
sentinel auth-pass loopgate $REDIS_PASSWORD
sentinel down-after-milliseconds loopgate 5000
sentinel failover-timeout loopgate 60000
sentinel parallel-syncs loopgate 1
CONF
exec redis-server "$conf" --sentinel
