# Sourced by the benchmark tools (profile.sh, wakeups.sh) and
# deploy/pgo-train.sh.
# write_origin_conf DIR MAIN SERVER: DIR/nginx.conf for a one-worker NGINX
# origin that keeps its files under DIR, in the foreground, with no access
# log and keep-alive for a million requests. MAIN goes first (load_module,
# master_process); SERVER is its server block.
write_origin_conf() {
  local dir=$1 main=$2 server=$3 user=""
  [[ $(id -u) == 0 ]] && user="user root;"
  mkdir -p "$dir/tmp"
  cat >"$dir/nginx.conf" <<CONF
$main
$user
daemon off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1024; }
http {
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  access_log off;
  keepalive_requests 1000000;
  $server
}
CONF
}
