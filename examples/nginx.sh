# shellcheck shell=bash
# examples/nginx.sh - sourced (bash) by run-http.sh and run-preload.sh:
# nginx from a private temporary prefix, never the system's configuration,
# logs or pid file.
#
#   nginx_find
#       prints the nginx binary (nginx-light, nginx-core or nginx), or
#       nothing when none is installed
#   nginx_conf DIR PORT NOFILE CONNS HTTP_EXTRA LOCATION [EVENTS_EXTRA]
#       writes DIR/nginx.conf: 2 workers, worker_rlimit_nofile NOFILE,
#       worker_connections CONNS, access_log off, every temporary path
#       and the pid and error log under DIR, one server on 127.0.0.1:PORT
#       whose `location /` block is LOCATION; HTTP_EXTRA goes at http level
#       (zones, for instance), EVENTS_EXTRA in the events block
#   nginx_start NGINX DIR LOG [ENV...]
#       starts NGINX on DIR's configuration in the foreground (daemon off),
#       in the background, under `env ENV...` when given (LD_PRELOAD=...);
#       sets NGINX_PID. The caller waits for its port.
#   nginx_pids
#       NGINX_PID and its workers
# nginx's workers are forked from the master without an exec, so a
# library preloaded in the master is in every worker.

nginx_find() {
	command -v nginx 2>/dev/null || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; }
}

nginx_conf() {
	local dir=$1 port=$2 nofile=$3 conns=$4 http_extra=$5 location=$6 events_extra=${7:-}
	mkdir -p "$dir/logs"
	cat >"$dir/nginx.conf" <<EOF
worker_processes 2;
worker_rlimit_nofile $nofile;
pid $dir/nginx.pid;
error_log $dir/logs/error.log error;
events { worker_connections $conns; $events_extra }
http {
	access_log off;
	default_type text/plain;
	keepalive_requests 100000000;
	keepalive_timeout 120s;
	client_body_temp_path $dir/body;
	proxy_temp_path $dir/proxy;
	fastcgi_temp_path $dir/fastcgi;
	uwsgi_temp_path $dir/uwsgi;
	scgi_temp_path $dir/scgi;
	$http_extra
	server {
		listen 127.0.0.1:$port backlog=4096;
		location / { $location }
	}
}
EOF
}

nginx_start() {
	local nginx=$1 dir=$2 log=$3
	shift 3
	env "$@" "$nginx" -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' 2>"$log" &
	NGINX_PID=$!
}

nginx_pids() {
	echo "$NGINX_PID $(pgrep -P "$NGINX_PID" 2>/dev/null | tr '\n' ' ')"
}
