#!/usr/bin/env python3
"""What each HTTP/2 proxy does when its origin closes connections after N requests.

NGINX ends an HTTP/2 connection after `keepalive_requests` streams (1000 by
default) with a GOAWAY, and the streams a proxy had already sent above its
last-stream-id are refused unprocessed. A proxy that sends them again on a
good connection hides this from its clients; one that does not fails them.

This starts one NGINX h2c origin with `keepalive_requests` set low enough
for that to happen often, then onelayer (the benchmark's config: an h2c
listener, an h2c upstream, retries on), nghttpx and HAProxy 2.6 (their h2
benchmark settings, tests/bench/h2_phase.sh) in front of it, and drives
each with h2load (16 connections x 32 streams of 64-byte POSTs, as in the
h2 benchmark). It prints, per proxy, the requests answered 2xx, answered
otherwise, and failed (reset or never answered), and for onelayer what its
metrics counted: streams refused and sent again, refused again (a retry),
and upstream connections opened. Everything is on 127.0.0.1 and stops by
itself.

With `--reloads N`, the origin is also reloaded (SIGHUP to NGINX's master)
every `--reload-every` seconds during each proxy's run, up to N times: its
old worker sends every connection a GOAWAY and finishes what it took, and
new connections go to the new worker. The table says how many reloads
each run saw.

`--max-requests N` gives onelayer's upstream
`pool.max_requests_per_connection: N` (at or below the origin's
keepalive_requests, no stream is ever refused).

Usage: tests/bench/origin_rotation.py [--onelayer BIN] [--other BIN]
           [--keepalive-requests N] [--requests N] [--proxies LIST]
           [--reloads N] [--reload-every SECONDS] [--max-requests N]
`--other` adds a row for another onelayer build (an older commit, say).
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_util  # noqa: E402
import h2_tools  # noqa: E402

ECHO_MODULE = "/usr/lib/nginx/modules/ngx_http_echo_module.so"


class Run:
    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = []

    def start(self, name, argv, **kw):
        log = open(os.path.join(self.tmp, name + ".log"), "wb")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def need_tools(script, tools):
    """Exits, naming it, when one of `tools` or NGINX's echo module (the
    origin's) is missing."""
    for tool in tools:
        if not shutil.which(tool):
            sys.exit("%s: %s not found" % (script, tool))
    if not os.path.exists(ECHO_MODULE):
        sys.exit("%s: %s not found (Debian libnginx-mod-http-echo)" % (script, ECHO_MODULE))


def need_port(port, what):
    if not bench_util.wait_port(port, 15):
        sys.exit("origin_rotation: %s did not listen on %d" % (what, port))


def start_nginx_origin(run, server, top="", http=""):
    """NGINX on a free port, one worker, no access log: `server` is the
    body of its one server block after the listen line (h2c with prior
    knowledge), `top` and `http` go at the top of the file and of its http
    block. Returns (port, the master process)."""
    port, = bench_util.free_ports(1)
    d = os.path.join(run.tmp, "origin")
    os.makedirs(d, exist_ok=True)
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write("""%(top)s
worker_processes 1;
daemon off;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %(d)s/body;
  proxy_temp_path %(d)s/proxy;
  fastcgi_temp_path %(d)s/fastcgi;
  uwsgi_temp_path %(d)s/uwsgi;
  scgi_temp_path %(d)s/scgi;
  %(http)s
  server {
    listen 127.0.0.1:%(port)d http2 backlog=4096;
    %(server)s
  }
}
""" % {"top": top, "d": d, "port": port, "http": http, "server": server})
    master = run.start("origin", ["nginx", "-p", d + "/", "-c", conf, "-e", d + "/error.log"])
    need_port(port, "the NGINX origin")
    return port, master


def start_origin(run, keepalive_requests):
    return start_nginx_origin(run, 'keepalive_requests %d;\n    location / { echo_read_request_body; echo -n "ok"; }'
                              % keepalive_requests, top="load_module %s;" % ECHO_MODULE)


def start_onelayer(run, name, binary, origin, max_requests=0, single_layer_headers=True):
    d = os.path.join(run.tmp, name)
    os.makedirs(d)
    cfg = bench_util.onelayer_config(origin, "bench", 1, 16000, listener_protocols=["http1", "h2c"],
                                    upstream_protocol="h2c", max_requests_per_connection=max_requests,
                                    single_layer_headers=single_layer_headers)
    with open(os.path.join(d, "onelayer.yaml"), "w") as f:
        f.write(cfg)
    ports = os.path.join(d, "ports")
    run.start(name, [binary, "--config", os.path.join(d, "onelayer.yaml"), "--ports-file", ports,
                     "--log-level", "warn"])
    found = bench_util.read_ports_file(ports, ["bench", "admin"], 15)
    if not found:
        sys.exit("origin_rotation: %s did not start (see %s/%s.log)" % (name, run.tmp, name))
    return found["bench"], found["admin"]


def start_nghttpx(run, origin):
    port, = bench_util.free_ports(1)
    run.start("nghttpx", ["nghttpx", "--conf=/dev/null", "--frontend=127.0.0.1,%d;no-tls" % port,
                          "--backend=127.0.0.1,%d;;proto=h2" % origin, "-n1", "--add-x-forwarded-for",
                          "--errorlog-file=" + os.path.join(run.tmp, "nghttpx.err")])
    need_port(port, "nghttpx")
    return port


def start_haproxy(run, origin):
    port, = bench_util.free_ports(1)
    cfg = os.path.join(run.tmp, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write(bench_util.haproxy_config(port, origin, 4000, proto="h2"))
    run.start("haproxy", ["haproxy", "-f", cfg, "-db"])
    need_port(port, "HAProxy")
    return port


def onelayer_counts(admin):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % admin, timeout=5).read().decode()

    def total(name, **labels):
        return int(bench_util.metric_sum(text, name, **labels))
    return {"resent": total("onelayer_refused_resends_total"),
            "refused_again": total("onelayer_retries_total", reason="refused-stream"),
            "connections": total("onelayer_upstream_connections_total", protocol="h2")}


def drive(port, body, requests, master, reloads, every):
    """h2load's figures, and how many times the origin was reloaded meanwhile."""
    done = threading.Event()
    sent = [0]

    def reload_origin():
        while sent[0] < reloads and not done.wait(every):
            os.kill(master.pid, signal.SIGHUP)
            sent[0] += 1
    t = threading.Thread(target=reload_origin)
    t.start()
    try:
        out = subprocess.run(["h2load", "-c16", "-m32", "-n", str(requests), "-d", body,
                              "http://127.0.0.1:%d/" % port],
                             capture_output=True, text=True, errors="replace", timeout=600)
    finally:
        done.set()
        t.join()
    res = h2_tools.parse_h2load(out.stdout)
    res["reloads"] = sent[0]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onelayer", default=os.path.join(HERE, "..", "..", "build", "onelayer"))
    ap.add_argument("--other", help="another onelayer build: a row of its own")
    ap.add_argument("--keepalive-requests", type=int, default=1000, help="the origin's (default 1000, NGINX's own)")
    ap.add_argument("--requests", type=int, default=500000, help="per proxy (default 500000)")
    ap.add_argument("--proxies", default="onelayer,nghttpx,haproxy")
    ap.add_argument("--reloads", type=int, default=0, help="reload the origin up to N times during each run")
    ap.add_argument("--reload-every", type=float, default=0.5, help="seconds between reloads (default 0.5)")
    ap.add_argument("--max-requests", type=int, default=0,
                    help="onelayer's pool.max_requests_per_connection (default 0: no limit)")
    a = ap.parse_args()
    need_tools("origin_rotation", ("nginx", "h2load"))

    tmp = tempfile.mkdtemp(prefix="onelayer-rotation.")
    run = Run(tmp)
    rows = []
    try:
        body = os.path.join(tmp, "body.bin")
        with open(body, "wb") as f:
            f.write(b"p" * 64)
        origin, master = start_origin(run, a.keepalive_requests)
        targets = []
        for kind in a.proxies.split(","):
            if kind == "onelayer":
                label = "onelayer" + (", max_requests_per_connection %d" % a.max_requests if a.max_requests else "")
                targets.append((label,) + start_onelayer(run, "onelayer", a.onelayer, origin, a.max_requests))
            elif kind == "nghttpx":
                targets.append(("nghttpx", start_nghttpx(run, origin), None))
            elif kind == "haproxy":
                targets.append(("HAProxy", start_haproxy(run, origin), None))
            else:
                sys.exit("origin_rotation: unknown proxy %s" % kind)
        if a.other:
            targets.insert(1, ("onelayer (--other)",) + start_onelayer(run, "onelayer-other", a.other, origin))
        for name, port, admin in targets:
            print("origin_rotation: %s, %d requests" % (name, a.requests), file=sys.stderr)
            res = drive(port, body, a.requests, master, a.reloads, a.reload_every)
            res["counts"] = onelayer_counts(admin) if admin else None
            rows.append((name, res))
    finally:
        run.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    print("Origin: NGINX h2c, keepalive_requests %d%s; h2load -c16 -m32, %d POSTs per proxy.\n"
          % (a.keepalive_requests, ", reloaded every %gs up to %d times" % (a.reload_every, a.reloads)
             if a.reloads else "", a.requests))
    reloads = a.reloads > 0
    print("| proxy | answered 2xx | answered otherwise | failed (reset, no answer) | refused and sent again | "
          "refused again | upstream connections opened |" + (" origin reloads |" if reloads else ""))
    print("|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if reloads else ""))
    for name, r in rows:
        c = r["counts"]
        failed = (r["requests"] or 0) - (r["status_2xx"] or 0) - (r["non2xx"] or 0)
        print("| %s | %s | %s | %s | %s | %s | %s |" % (
            name, r["status_2xx"], r["non2xx"], failed,
            c["resent"] if c else "-", c["refused_again"] if c else "-", c["connections"] if c else "-")
            + (" %d |" % r["reloads"] if reloads else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
