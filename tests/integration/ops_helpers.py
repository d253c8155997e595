"""Helpers shared by the operating tests (admin, metrics, reload, drain,
workers, logging, dashboard). Standard library only; builds on harness.py
without changing it.

* ``config(...)``: a config dict with several listeners/routes/upstreams,
  serialized with harness.to_yaml (simple_config has one listener only).
* ``admin(proxy, method, path)``: one request to the admin listener.
* ``metrics(test, proxy)``: GET /metrics, asserted valid with promcheck.
* ``read_ports(path)``, ``wait_until(...)``, ``rewrite_config(...)``.
* ``access_records(...)``: parsed access log lines (text or JSON).
"""

import json
import os
import re
import time

import harness as h
import promcheck

FAST_BACKOFF = {"base": "1ms", "cap": "5ms", "jitter": "none"}


def route(name, upstream="origin", **extra):
    r = {"name": name, "upstream": upstream}
    r.update(extra)
    return r


def listener(name, routes, listen="127.0.0.1:0", **extra):
    lst = {"name": name, "listen": listen}
    lst.update(extra)
    lst["routes"] = list(routes)
    return lst


def upstream(name, endpoints, **extra):
    u = {"name": name, "endpoints": list(endpoints), "connect_timeout": "1s"}
    u.update(extra)
    return u


def config(listeners, upstreams, **top):
    """YAML text: admin on 127.0.0.1:0, drain_timeout 2s unless overridden."""
    cfg = {"layer_id": "ops", "admin": {"listen": "127.0.0.1:0"}, "drain_timeout": "2s"}
    cfg.update(top)
    cfg["listeners"] = list(listeners)
    cfg["upstreams"] = list(upstreams)
    return h.to_yaml(cfg) + "\n"


def admin(proxy, method, path, body=b"", timeout=5.0):
    """One request to the admin listener on a fresh connection."""
    with h.Conn(proxy.admin_port, timeout=timeout) as c:
        return c.request(method, path, headers=[("Connection", "close")], body=body, host="127.0.0.1")


def metrics(test, proxy):
    """The /metrics text, after asserting 200 and a valid exposition."""
    r = admin(proxy, "GET", "/metrics")
    test.assertEqual(r.status, 200, r)
    text = r.body.decode()
    problems = promcheck.check(text, use_promtool=False)
    test.assertEqual(problems, [], text)
    return text


def route_requests(text, route_name):
    """Sum of onelayer_requests_total over every code and listener of a route."""
    return sum(v for l, v in series(text, "onelayer_requests_total") if l.get("route") == route_name)


def settled_metrics(test, proxy, route_name, requests, timeout=5.0):
    """/metrics once `requests` answers of `route_name` are counted.

    The proxy counts a request right after writing its last response byte,
    so a client can read its response a moment before the counters move:
    wait for requests_total and the histogram count, then read once more
    (the amplification window is updated just after them)."""
    def ready():
        text = metrics(test, proxy)
        done = (route_requests(text, route_name) == requests and
                value(text, "onelayer_request_duration_seconds_count", route=route_name) == requests)
        return text if done else None
    if not wait_until(ready, timeout):
        text = metrics(test, proxy)
        test.fail("route %s: %s requests counted, expected %d\n%s" % (
            route_name, route_requests(text, route_name), requests, text))
    time.sleep(0.05)
    return metrics(test, proxy)


def value(text, name, **labels):
    return promcheck.value(text, name, **labels)


def total(text, name):
    """The sum of every sample named `name`, whatever its labels."""
    return sum(v for _, v in series(text, name))


def series(text, name):
    """[(labels dict, value)] of every sample named `name`."""
    return [(s.labels, s.value) for s in promcheck.samples(text) if s.name == name]


def declined(text, route_name):
    """{reason: count} of onelayer_retries_declined_total for a route."""
    return {labels["reason"]: v for labels, v in series(text, "onelayer_retries_declined_total")
            if labels.get("route") == route_name}


def read_ports(path):
    ports = {}
    try:
        with open(path) as f:
            for line in f:
                if line.strip():
                    name, port = line.split()
                    ports[name] = int(port)
    except FileNotFoundError:
        pass
    return ports


wait_until = h.wait_until  # ops.wait_until(...) in the operations tests


def rewrite_config(proxy, text):
    """Replace the proxy's config file atomically (a reload reads it whole)."""
    tmp = proxy.config_path + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, proxy.config_path)
    proxy.config_text = text


def connect_refused(port, timeout=1.0):
    """True when nothing serves 127.0.0.1:port: the connect is refused, or
    the connection is reset or closed within `timeout` (a connection caught
    in a closing listener's backlog). Sends no request, so a listener that
    is still open never forwards anything because of this probe."""
    import select
    import socket
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError:
        return True
    try:
        r, _, _ = select.select([s], [], [], timeout)
        if not r:
            return False  # accepted (or waiting in an open backlog): served
        try:
            return s.recv(1) == b""
        except OSError:
            return True
    finally:
        s.close()


TEXT_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def parse_text_access_line(line):
    """`<time> key=value ...` -> dict with 'time' and every key (values as
    text; quoted values unescaped; '-' kept as is)."""
    stamp, _, rest = line.partition(" ")
    out = {"time": stamp}
    for key, raw in TEXT_FIELD.findall(rest):
        out[key] = json.loads(raw) if raw.startswith('"') else raw
    return out


def access_records(proxy, count, predicate=lambda r: True, timeout=5.0, fmt="text"):
    """Waits until `count` access records matching predicate were flushed
    (the log is flushed every 200 ms); returns every matching record."""
    def records():
        out = []
        for line in proxy.access_log():
            rec = json.loads(line) if fmt == "json" else parse_text_access_line(line)
            if predicate(rec):
                out.append(rec)
        return out
    got = wait_until(lambda: (lambda rs: rs if len(rs) >= count else None)(records()), timeout)
    return got if got else records()
