#!/usr/bin/env bash
# Starts the servers the remote tests use, on 127.0.0.1 only, and prints `export` lines
# for them (use: `source <(bash scripts/start-test-servers.sh)`):
#   - a real S3-protocol server (moto_server from the repo's .venv) → ZARRBUF_TEST_S3_ENDPOINT
#   - a static HTTP server with byte ranges over fixtures/data → ZARRBUF_TEST_HTTP_URL
#   - object stores at latency (scripts/latency-server.sh: nginx, installed here from Debian
#     when missing), each serving a scratch directory the tests write arrays into:
#     20 ms to the first byte → ZARRBUF_TEST_LATENCY_{URL,ROOT,LOG}; no delay →
#     ZARRBUF_TEST_NEAR_{URL,ROOT,LOG}; 20 ms for chunks and 1 ms for metadata (a CDN that
#     caches the metadata) → ZARRBUF_TEST_CDN_{URL,ROOT,LOG}; every distinct request
#     answered 503 on its first attempt → ZARRBUF_TEST_FAULTY_{URL,ROOT,LOG}; every distinct
#     request's body cut short on its first attempt → ZARRBUF_TEST_SHORT_{URL,ROOT,LOG}
# The servers run in the background until they are stopped (`kill $ZARRBUF_TEST_SERVER_PIDS`,
# as benchmark scripts do on exit, so a server left behind does not take CPU from the next
# measurement); their logs go to target/test-servers/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$root/.venv/bin/python"
[ -x "$py" ] || { echo "run scripts/setup-python-env.sh first" >&2; exit 1; }
logs="$root/target/test-servers"
mkdir -p "$logs"

free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# A server started before a later step fails is stopped again: only a script that gets to
# print its `export` lines leaves servers running.
pids=""
started=0
trap '[ "$started" = 1 ] || [ -z "$pids" ] || kill $pids 2>/dev/null || true' EXIT

s3_port=$(free_port)
nohup "$root/.venv/bin/moto_server" -H 127.0.0.1 -p "$s3_port" >"$logs/moto.log" 2>&1 &
pids="$!"
http_port=$(free_port)
nohup "$py" "$root/scripts/http_range_server.py" --bind 127.0.0.1 --directory "$root/fixtures/data" "$http_port" >"$logs/http.log" 2>&1 &
pids="$pids $!"

# nginx with the lua module, for the latency servers (Debian's packages; as root, or with
# sudo where that works without a password).
if ! command -v nginx >/dev/null || [ ! -f /usr/lib/nginx/modules/ngx_http_lua_module.so ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo -n"
    echo "start-test-servers: installing nginx-light and libnginx-mod-http-lua" >&2
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light libnginx-mod-http-lua >&2 \
        || { $sudo apt-get update -q >&2 && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light libnginx-mod-http-lua >&2; }
    # The package starts the system's nginx on port 80; the tests run their own.
    { $sudo service nginx stop || $sudo pkill -x nginx; } >/dev/null 2>&1 || true
fi
latency_exports=""
for profile in "LATENCY --delay-ms 20 --rate 100m" "NEAR --delay-ms 0" "CDN --delay-ms 20 --metadata-delay-ms 1" "FAULTY --delay-ms 5 --faults 503" "SHORT --delay-ms 5 --faults short"; do
    set -- $profile
    name=$1
    shift
    root_dir="$logs/${name,,}-root"
    rm -rf "$root_dir"
    mkdir -p "$root_dir"
    exports=$(bash "$root/scripts/latency-server.sh" --root "$root_dir" --name "test-${name,,}" "$@")
    pid=$(printf '%s\n' "$exports" | sed -n 's/^export ZARRBUF_LATENCY_PID=//p')
    pids="$pids $pid"
    latency_exports="$latency_exports$(printf '%s\n' "$exports" | sed -n "s/^export ZARRBUF_LATENCY_\(URL\|LOG\)=/export ZARRBUF_TEST_${name}_\1=/p")
export ZARRBUF_TEST_${name}_ROOT=$root_dir
"
done

wait_for() {
    for _ in $(seq 1 100); do
        if "$py" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)" "$1" 2>/dev/null; then return 0; fi
        sleep 0.2
    done
    echo "server at $1 did not start; see $logs" >&2
    exit 1
}
wait_for "http://127.0.0.1:$s3_port/moto-api/"
wait_for "http://127.0.0.1:$http_port/"
started=1
echo "export ZARRBUF_TEST_S3_ENDPOINT=http://127.0.0.1:$s3_port"
echo "export ZARRBUF_TEST_HTTP_URL=http://127.0.0.1:$http_port"
printf '%s' "$latency_exports"
echo "export ZARRBUF_TEST_SERVER_PIDS='$pids'"
echo "export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1"
