#!/usr/bin/env bash
# A local object-store stand-in with cloud latency: nginx on 127.0.0.1 serving a directory
# with byte ranges, PUT and DELETE (WebDAV), a delay before every answer (the time to first
# byte), a rate cap per connection, and optionally injected faults. Started as the calling
# user's own process; prints `export` lines (use: `source <(bash scripts/latency-server.sh ...)`).
#
#   scripts/latency-server.sh --root DIR [--delay-ms 20] [--metadata-delay-ms MS] [--rate 100m]
#                             [--faults MODE] [--fault-every N] [--name NAME]
#
#   --delay-ms   time to first byte of every request (default 0)
#   --metadata-delay-ms  time to first byte of metadata keys instead (zarr.json, .zarray, ...;
#                default: --delay-ms): a CDN that caches the metadata in front of a bucket
#   --rate       nginx limit_rate per connection, e.g. 100m, 50m (default 0: unlimited)
#   --faults     none (default), 503 (answer 503), stall (wait 30 s before answering), short
#                (a complete answer with half the body), badrange (a wrong Content-Range): on
#                the first request of every Nth distinct (method, path) of chunk data
#                (metadata keys are never faulted), so that a client that retries gets
#                through on its second
#   --fault-every  N for --faults (default 1: every distinct request fails once)
#   --name       a name for the server's folder under target/latency-server/ (default: the port)
#
# Exports ZARRBUF_LATENCY_URL (http://127.0.0.1:PORT), ZARRBUF_LATENCY_PID and
# ZARRBUF_LATENCY_LOG (the access log: `$msec $request_time $connection $body_bytes_sent
# "$http_range" $request_method $status $uri` per request; scripts/access_log_stats.py turns
# it into requests, bytes and the peak of requests in flight). Stop it with
# `kill $ZARRBUF_LATENCY_PID`. Needs Debian's nginx-light and libnginx-mod-http-lua
# (scripts/test installs them).
set -euo pipefail
root_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
serve="" delay_ms=0 meta_delay_ms="" rate=0 faults=none every=1 name=""
while [ $# -gt 0 ]; do
    case "$1" in
        --root) serve="$2"; shift 2 ;;
        --delay-ms) delay_ms="$2"; shift 2 ;;
        --metadata-delay-ms) meta_delay_ms="$2"; shift 2 ;;
        --rate) rate="$2"; shift 2 ;;
        --faults) faults="$2"; shift 2 ;;
        --fault-every) every="$2"; shift 2 ;;
        --name) name="$2"; shift 2 ;;
        *) echo "latency-server: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$serve" ] || { echo "latency-server: --root DIR is required" >&2; exit 2; }
case "$faults" in none|503|stall|short|badrange) ;; *)
    echo "latency-server: --faults must be none, 503, stall, short or badrange" >&2; exit 2 ;;
esac
meta_delay_ms=${meta_delay_ms:-$delay_ms}
[[ "$delay_ms" =~ ^[0-9]+$ && "$meta_delay_ms" =~ ^[0-9]+$ && "$every" =~ ^[1-9][0-9]*$ ]] || {
    echo "latency-server: --delay-ms, --metadata-delay-ms and --fault-every take whole numbers" >&2
    exit 2; }
nginx_bin=$(command -v nginx || true)
modules=/usr/lib/nginx/modules
if [ -z "$nginx_bin" ] || [ ! -f "$modules/ngx_http_lua_module.so" ]; then
    echo "latency-server: needs nginx with the lua module (apt-get install nginx-light libnginx-mod-http-lua)" >&2
    exit 1
fi
mkdir -p "$serve"
serve="$(cd "$serve" && pwd)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir="$root_dir/target/latency-server/${name:-$port}"
rm -rf "$dir"
mkdir -p "$dir/body"
delay=$(awk -v ms="$delay_ms" 'BEGIN { printf "%.3f", ms / 1000 }')
meta_delay=$(awk -v ms="$meta_delay_ms" 'BEGIN { printf "%.3f", ms / 1000 }')
user_line=""
[ "$(id -u)" = 0 ] && user_line="user root;"
cat >"$dir/nginx.conf" <<EOF
load_module $modules/ndk_http_module.so;
load_module $modules/ngx_http_lua_module.so;
$user_line
worker_processes 2;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 8192; }
http {
    log_format timing '\$msec \$request_time \$connection \$body_bytes_sent "\$http_range" \$request_method \$status \$uri';
    access_log $dir/access.log timing;
    client_body_temp_path $dir/body;
    client_max_body_size 0;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    lua_shared_dict attempts 64m;
    server {
        listen 127.0.0.1:$port;
        root $serve;
        location / {
            access_by_lua_block {
                local uri = ngx.var.uri
                local metadata = uri:match("%.json$") or uri:match("/%.z[a-z]+$")
                local delay = metadata and $meta_delay or $delay
                if delay > 0 then ngx.sleep(delay) end
                local mode = "$faults"
                if mode == "none" then return end
                -- Metadata is left alone: the faults are for the chunk data a read fetches.
                if metadata then return end
                local key = ngx.var.request_method .. " " .. ngx.var.uri
                local seen = ngx.shared.attempts:incr(key, 1, 0)
                if seen ~= 1 or ngx.crc32_short(key) % $every ~= 0 then return end
                if mode == "503" then return ngx.exit(503) end
                if mode == "stall" then ngx.sleep(30) end
                ngx.ctx.fault = mode
            }
            header_filter_by_lua_block {
                if ngx.ctx.fault == "badrange" and ngx.header["Content-Range"] then
                    ngx.header["Content-Range"] = "bytes 0-0/1"
                end
                if ngx.ctx.fault == "short" then
                    -- Sent chunked, the cut body is a complete answer that is too short
                    -- (with its Content-Length kept, the client would wait for the rest).
                    ngx.header.content_length = nil
                end
            }
            body_filter_by_lua_block {
                if ngx.ctx.fault ~= "short" then return end
                if ngx.ctx.cut then ngx.arg[1] = "" return end
                local chunk = ngx.arg[1]
                if chunk and #chunk > 1 then
                    ngx.arg[1] = string.sub(chunk, 1, math.floor(#chunk / 2))
                    ngx.arg[2] = true
                    ngx.ctx.cut = true
                end
            }
            limit_rate $rate;
            dav_methods PUT DELETE MKCOL;
            create_full_put_path on;
        }
    }
}
EOF
nohup "$nginx_bin" -c "$dir/nginx.conf" -e "$dir/error.log" >"$dir/stdout.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
    if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 1).close()" "$port" 2>/dev/null; then
        echo "export ZARRBUF_LATENCY_URL=http://127.0.0.1:$port"
        echo "export ZARRBUF_LATENCY_PID=$pid"
        echo "export ZARRBUF_LATENCY_LOG=$dir/access.log"
        exit 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
echo "latency-server: nginx did not start; see $dir/error.log:" >&2
cat "$dir/error.log" >&2 || true
kill "$pid" 2>/dev/null || true
exit 1
