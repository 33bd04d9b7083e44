# test/lib/prometheus.sh — a real Prometheus (Debian's binary) for a test,
# scraping the stand-in's /metrics every second, on loopback, in a temp dir.
# Source after cluster.sh/standin.sh.
#
#   prometheus_start DIR TARGET [INTERVAL]  # TARGET host:port; scrape every INTERVAL (1s), sets PROM_URL PROM_PID
#   prometheus_stop DIR             # always call it (trap): stops the server
#   prometheus_connect DB           # ALTER SYSTEM mlplat.prometheus_url + reload
#   prometheus_disconnect DB

PROMETHEUS=${PROMETHEUS:-prometheus}

prometheus_start() {
	local dir=$1 target=$2 interval=${3:-1s} port i
	command -v "$PROMETHEUS" >/dev/null || { echo "# no prometheus binary (apt-get install prometheus)"; return 1; }
	mkdir -p "$dir/data"
	port=$(free_port)
	cat >"$dir/prometheus.yml" <<YML
global:
  scrape_interval: $interval
  scrape_timeout: $interval
  evaluation_interval: $interval
scrape_configs:
  - job_name: standin
    metrics_path: /metrics
    static_configs:
      - targets: ['$target']
YML
	# bounded: even a test that forgets to stop it does not leave it running for long
	timeout 1800 "$PROMETHEUS" --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
		--web.listen-address="127.0.0.1:$port" --storage.tsdb.retention.time=1h \
		--log.level=warn >"$dir/prometheus.log" 2>&1 &
	PROM_PID=$!
	echo "$PROM_PID" >"$dir/pid"
	PROM_URL=http://127.0.0.1:$port
	for i in $(seq 1 100); do
		curl -sf "$PROM_URL/-/ready" >/dev/null 2>&1 && return 0
		kill -0 "$PROM_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "# prometheus did not become ready:"; sed 's/^/#   /' "$dir/prometheus.log" | tail -5
	return 1
}

prometheus_stop() {
	local pid
	pid=$(cat "$1/pid" 2>/dev/null) || return 0
	kill "$pid" 2>/dev/null
	for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null
	rm -f "$1/pid"
	return 0
}

# Has Prometheus scraped the target at least once (up == 1)?
prometheus_scraping() {
	curl -s "$PROM_URL/api/v1/query?query=up" | python3 -c '
import json,sys
r=json.load(sys.stdin)["data"]["result"]
sys.exit(0 if r and r[0]["value"][1]=="1" else 1)'
}

prometheus_connect() {
	$PSQL -d "$1" -c "ALTER SYSTEM SET mlplat.prometheus_url = '$PROM_URL'" -c "SELECT pg_reload_conf()" >/dev/null
}

prometheus_disconnect() {
	$PSQL -d "$1" -c "ALTER SYSTEM RESET mlplat.prometheus_url" -c "SELECT pg_reload_conf()" >/dev/null
}
