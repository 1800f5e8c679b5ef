# Apache RocketMQ 5.3.3's name server and gRPC proxy in local mode (the proxy runs its broker in
# its own JVM), on free loopback ports, for the suites that compare Comet's gRPC endpoint with
# Apache's. Sourced; the caller sets
#   WORK       work directory (store, configuration, logs under $WORK/apache*)
#   WAIT       seconds any single wait may take
#   JAVA_HEAP  heap of each JVM (optional, 512m)
#   PIDS       an array the started JVMs' process ids are appended to (the caller stops them)
#   APACHE_NAME      name of this instance's directory and logs under $WORK (optional, apache),
#                    so that a suite can run two instances
#   APACHE_PROXY_JSON  extra members of the proxy's JSON configuration (optional), such as
#                    its authentication keys: '"authenticationEnabled": true, ...'
# and defines `die`. Needs java 17+, mvn and python3.
# shellcheck shell=bash
# The APACHE_* addresses are set here for the caller.
# shellcheck disable=SC2034

APACHE_PROXY_POM="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/apache-proxy/pom.xml"

# apache_wait_port <host:port> <what>: polls until the address accepts connections, or dies
# after $WAIT seconds.
apache_wait_port() {
    local addr="$1" what="$2" deadline=$((SECONDS + WAIT))
    until python3 -c "import socket,sys; h,p=sys.argv[1].rsplit(':',1); socket.create_connection((h,int(p)),1).close()" "$addr" 2>/dev/null; do
        ((SECONDS < deadline)) || die "$what did not listen on $addr within ${WAIT}s"
        sleep 0.5
    done
}

# apache_free_ports <n>: prints n loopback ports that were free a moment ago.
apache_free_ports() {
    python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# apache_broker_port: prints a port p with p-2 (the broker's fast port) and p+1 (HA) free too.
apache_broker_port() {
    python3 - <<'PY'
import socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
for p in range(31000, 40000, 7):
    if all(free(q) for q in (p - 2, p, p + 1)):
        print(p); break
PY
}

# apache_proxy_start [broker.conf line...]: resolves the jars (Maven, first run only), starts
# the name server and the proxy with its broker, waits until all listen, and sets
# APACHE_NAMESRV, APACHE_BROKER (remoting, ip:port) and APACHE_GRPC (the proxy's gRPC ip:port).
# Extra arguments are appended to the broker's configuration.
apache_proxy_start() {
    local name="${APACHE_NAME:-apache}"
    local cp_file="${APACHE_PROXY_POM%/pom.xml}/target/classpath.txt"
    [[ -s "$cp_file" ]] || mvn -q -B -f "$APACHE_PROXY_POM" dependency:build-classpath \
        -Dmdep.outputFile="$cp_file" >&2 || die "Maven could not resolve Apache RocketMQ 5.3.3"
    local home="$WORK/$name" ns_port grpc_port remoting_port broker_port line
    mkdir -p "$home/conf"
    read -r ns_port grpc_port remoting_port < <(apache_free_ports 3)
    broker_port="$(apache_broker_port)"
    printf 'listenPort=%s\nbindAddress=127.0.0.1\n' "$ns_port" >"$home/conf/namesrv.conf"
    cat >"$home/conf/broker.conf" <<CONF
brokerClusterName=ProxyCluster
brokerName=broker-proxy
brokerId=0
brokerIP1=127.0.0.1
listenPort=$broker_port
namesrvAddr=127.0.0.1:$ns_port
storePathRootDir=$home/store
storePathCommitLog=$home/store/commitlog
autoCreateTopicEnable=true
CONF
    for line in "$@"; do
        printf '%s\n' "$line" >>"$home/conf/broker.conf"
    done
    cat >"$home/conf/rmq-proxy.json" <<CONF
{"rocketMQClusterName": "ProxyCluster", "proxyMode": "local", "namesrvAddr": "127.0.0.1:$ns_port",
 "grpcServerPort": $grpc_port, "remotingListenPort": $remoting_port${APACHE_PROXY_JSON:+, $APACHE_PROXY_JSON}}
CONF
    local jvm=(java -Xms"${JAVA_HEAP:-512m}" -Xmx"${JAVA_HEAP:-512m}" -XX:MaxDirectMemorySize=512m
        -Duser.home="$home" -Drocketmq.home.dir="$home" -cp "$(cat "$cp_file")")
    ROCKETMQ_HOME="$home" "${jvm[@]}" org.apache.rocketmq.namesrv.NamesrvStartup \
        -c "$home/conf/namesrv.conf" >"$WORK/$name-namesrv.log" 2>&1 &
    PIDS+=($!)
    apache_wait_port "127.0.0.1:$ns_port" "Apache name server"
    ROCKETMQ_HOME="$home" "${jvm[@]}" -Dcom.rocketmq.proxy.configPath="$home/conf/rmq-proxy.json" \
        org.apache.rocketmq.proxy.ProxyStartup -pm local -bc "$home/conf/broker.conf" \
        >"$WORK/$name-proxy.log" 2>&1 &
    PIDS+=($!)
    apache_wait_port "127.0.0.1:$broker_port" "Apache broker"
    apache_wait_port "127.0.0.1:$grpc_port" "Apache proxy (gRPC)"
    APACHE_NAMESRV="127.0.0.1:$ns_port"
    APACHE_BROKER="127.0.0.1:$broker_port"
    APACHE_GRPC="127.0.0.1:$grpc_port"
}
