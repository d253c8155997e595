"""Fleet-wide retry budgets (docs/fleet.md) through the real binary and a
real redis-server: syncing, safe mode (with the origin's retries within its
bound during an outage) and rejoining when Redis is killed, paused, reached
through a relay that delays and then drops everything or answers errors, or
answers garbage (a scripted fake Redis), AUTH that never shows, and retries
counted by other layers lowering this fleet's allowance."""

import math
import os
import re
import shutil
import signal
import tempfile
import time
import unittest

import harness as h
import ops_helpers as ops
from fleet_helpers import CountingOrigin, FailingLoad, FakeRedis, RedisRelay, RedisServer, Sentinel
from harness import IntegrationTest, wait_until
from interleaved_load import InterleavedLoad

INTERVAL = 0.2
STALE = 0.6
# Scheduling on a loaded CI machine: added to every "within" bound below.
MARGIN = 1.0
# Growth of the proxy's resident size a hostile Redis may cause: the
# sanitizer build keeps freed memory in quarantine, so it gets more room.
RSS_GROWTH_KB = 8 * 1024 if os.environ.get("ONELAYER_SANITIZED") != "1" else 64 * 1024


def fleet_block(port, **extra):
    f = {"redis": "127.0.0.1:%d" % port, "sync_interval": "200ms", "timeout": "100ms", "stale_after": "600ms"}
    f.update(extra)
    return f


def fleet_config(origin_port, redis_port, *, budget=None, fleet=None, listener=None, retry=None):
    b = {"ratio": 0.1, "min_per_second": 5, "scope": "fleet", "service": "svc"}
    b.update(budget or {})
    return h.simple_config(
        origin_port,
        retry=retry or {"max_attempts": 2, "retry_on": [503], "backoff": {"base": "1ms", "cap": "2ms"}},
        upstream={"retry_budget": b},
        listener=listener,
        fleet=fleet or fleet_block(redis_port))


class FleetTest(IntegrationTest):
    def start_redis(self, **kw):
        r = RedisServer(**kw)
        self.addCleanup(r.cleanup)
        return r.start()

    def state(self, proxy, service="svc"):
        text = ops.metrics(self, proxy)
        return ops.value(text, "onelayer_fleet_state", service=service)

    def errors(self, proxy, reason):
        return ops.value(ops.metrics(self, proxy), "onelayer_fleet_sync_errors_total", reason=reason) or 0

    def wait_state(self, proxy, want, within):
        start = time.monotonic()
        ok = wait_until(lambda: self.state(proxy) == want, timeout=within + 5)
        took = time.monotonic() - start
        self.assertTrue(ok, "fleet state never became %s" % want)
        return took

    def requests_all_answered(self, port, n=20):
        """n requests to a healthy origin: every one answered 200, none slow."""
        worst = 0.0
        for _ in range(n):
            t = time.monotonic()
            with h.Conn(port, timeout=5) as c:
                r = c.request("GET", "/")
            worst = max(worst, time.monotonic() - t)
            self.assertEqual(r.status, 200, r)
        return worst

    def safe_mode_warnings(self, proxy):
        return proxy.stderr().count("are local (safe mode")


class SyncTest(FleetTest):
    def test_syncs_and_shows_the_fleet_view(self):
        redis = self.start_redis()
        origin = self.start_origin(default=h.respond(200))
        proxy = self.start_proxy(fleet_config(origin.port, redis.port))
        self.wait_state(proxy, 1, INTERVAL + MARGIN)
        self.requests_all_answered(proxy.port(), 10)
        self.assertTrue(wait_until(lambda: "svc" in ops.admin(proxy, "GET", "/fleet").body.decode()
                                   and ops.value(ops.metrics(self, proxy), "onelayer_fleet_first_attempts_per_second",
                                                 service="svc") == 1.0, timeout=5))
        view = ops.admin(proxy, "GET", "/fleet").body.decode()
        self.assertRegex(view, r"svc\s+synced\s+1\s+1\.0\s+0\.0\s+0\.0")
        text = ops.metrics(self, proxy)
        self.assertEqual(ops.value(text, "onelayer_fleet_members", service="svc"), 1)
        self.assertEqual(ops.value(text, "onelayer_fleet_share", service="svc"), 1)
        self.assertGreater(ops.value(text, "onelayer_fleet_sync_seconds_count"), 0)
        # The keys are hash-tagged per service and expire by themselves.
        self.assertTrue(redis.command("TTL", "onelayer:{svc}:m").startswith(b":"))
        self.assertNotEqual(redis.command("PTTL", "onelayer:{svc}:m"), b":-1\r\n")

    def test_cli_prints_the_fleet_view_from_redis(self):
        redis = self.start_redis()
        origin = self.start_origin(default=h.respond(200))
        proxy = self.start_proxy(fleet_config(origin.port, redis.port))
        self.wait_state(proxy, 1, INTERVAL + MARGIN)
        self.requests_all_answered(proxy.port(), 10)
        addr = "127.0.0.1:%d" % redis.port
        self.assertTrue(wait_until(lambda: h.run_onelayer(["fleet", "--redis", addr])[1].count("svc") == 1, timeout=5))
        view = r"svc\s+1\s+1\.0\s+0\.0\s+0\.0\s+1\.000\s+51\.0\s+\d+\.\ds"
        runs = []

        def shown():
            runs.append(h.run_onelayer(["fleet", "--redis", addr, "--service", "svc", "--min-per-second", "5",
                                        "--ratio", "0.1"]))
            return runs[-1][0] == 0 and re.search(view, runs[-1][1])
        # Once the instance's next sync has added its 10 first attempts (no
        # retries): 0.1 x 10 + 5 x 10 = 51 left.
        self.assertTrue(wait_until(shown, timeout=5), runs[-1])
        code, out, err = h.run_onelayer(["fleet", "--redis", "127.0.0.1:1"])
        self.assertEqual(code, 1)
        self.assertIn("cannot connect to 127.0.0.1:1", err)
        self.assertEqual(h.run_onelayer(["fleet"])[0], 2)

    def test_reload_keeps_the_connection_when_fleet_is_unchanged(self):
        redis = self.start_redis()
        origin = self.start_origin(default=h.respond(200))
        proxy = self.start_proxy(fleet_config(origin.port, redis.port))
        self.wait_state(proxy, 1, INTERVAL + MARGIN)
        with open(proxy.config_path) as f:
            text = f.read()
        with open(proxy.config_path, "w") as f:
            f.write(text.replace("min_per_second: 5", "min_per_second: 6"))
        r = ops.admin(proxy, "POST", "/reload")
        self.assertEqual(r.status, 200, r)
        time.sleep(3 * INTERVAL)
        self.assertEqual(self.errors(proxy, "disconnected"), 0)
        self.assertEqual(self.state(proxy), 1)
        self.assertIn("min_per_second: 6", ops.admin(proxy, "GET", "/config").body.decode())
        # One link, made at start: the reload neither dropped nor remade it.
        self.assertEqual(proxy.stderr().count("share their retry budgets through Redis"), 1)
        self.assertNotIn("Redis link lost", proxy.stderr())


def safe_mode_bound(budget, n, first, seconds, rate, fleet_first_before):
    """The most retries a fleet of n instances may send, from the moment
    Redis failed and for `seconds`, while they send `first` first attempts
    at `rate` each per second, after `fleet_first_before` first attempts
    with Redis up (within 10 s) (docs/fleet.md, "Safe mode"). Until safe mode an
    instance spends only what its last share left it: at most twice its
    grant and at least one token, and a sync answer already on its way may
    load one more; together at most 2 x (2 x the fleet's grant of one
    interval + one token each). In safe mode each of the n instances runs
    the local budget with min_per_second / n (the last known fleet size):
    `ratio` per request and, all of them together, min_per_second per
    second, counted from up to one request before the failure."""
    ratio, floor = budget["ratio"], budget["min_per_second"]
    fleet_grant = (ratio * fleet_first_before + floor * 10) * INTERVAL / 10
    held = 2 * (2 * fleet_grant + n)
    return held + ratio * first + floor * (seconds + 1.0 / rate)


class FaultTest(FleetTest):
    """A fleet of INSTANCES in front of an origin failing every request (an
    outage under way) loses Redis: every instance goes local within
    stale_after + one interval, no request errs or waits, the origin's
    retries stay within the safe-mode bound (the floor shared by the last
    known fleet size, not one floor each), and every instance rejoins within
    two intervals of Redis returning."""

    INSTANCES = 3
    RATE = 40        # requests per second to each instance, all failing
    BEFORE = 0.6     # seconds of outage with Redis up, so shares are known
    FAULT_LOAD = 2.5  # seconds counted from the fault on
    BUDGET = {"ratio": 0.1, "min_per_second": 20}

    def start_fleet(self, redis_port):
        origin = CountingOrigin(503)
        self.addCleanup(origin.stop)
        fleet = [self.start_proxy(fleet_config(origin.port, redis_port, budget=self.BUDGET))
                 for _ in range(self.INSTANCES)]
        return origin, fleet

    def members_known(self, proxy):
        text = ops.metrics(self, proxy)
        return (ops.value(text, "onelayer_fleet_state", service="svc") == 1
                and ops.value(text, "onelayer_fleet_members", service="svc") == self.INSTANCES)

    def check_fault(self, origin, fleet, faults, restore):
        """faults: applied one after another, evenly spaced over FAULT_LOAD
        seconds of failing load (the first one puts Redis out of reach);
        restore brings it back. The origin's arrivals are counted exactly
        from the first fault to the end of the load."""
        self.assertTrue(wait_until(lambda: all(self.members_known(p) for p in fleet), timeout=INTERVAL + MARGIN + 5),
                        "the fleet never synced with every member")
        load = FailingLoad([p.port() for p in fleet], self.RATE).start()
        self.addCleanup(load.stop)
        time.sleep(self.BEFORE)
        fleet_first_before = origin.totals()[0]
        origin.reset()
        fault_at = time.monotonic()
        for i, fault in enumerate(faults):
            time.sleep(max(0.0, fault_at + i * self.FAULT_LOAD / len(faults) - time.monotonic()))
            fault()
            if i == 0:
                for p in fleet:
                    self.wait_state(p, 0, STALE + INTERVAL + MARGIN)
                    self.assertLessEqual(time.monotonic() - fault_at, STALE + INTERVAL + MARGIN)
        time.sleep(max(0.0, fault_at + self.FAULT_LOAD - time.monotonic()))
        load.stop()
        seconds = time.monotonic() - fault_at
        first, retries = origin.totals()
        bound = safe_mode_bound(self.BUDGET, self.INSTANCES, first, seconds, self.RATE, fleet_first_before)
        print("\n%s: %d first attempts, %d retries in %.2f s from the fault; safe-mode bound %.1f;"
              " slowest request %.0f ms" % (self.id().rsplit(".", 1)[-1], first, retries, seconds, bound,
                                            1e3 * load.slowest[0]))
        # A request held by a Redis that never answers would end in the
        # client's 5 s timeout (an error). The load shares this process with
        # the origin and the relay, and a busy machine stalls it for a few
        # hundred ms now and then, so its slowest request gets 1 s; the
        # relay test's p99 comparison is the fine check of waiting.
        self.assertEqual(load.errors, [])
        self.assertLess(load.slowest[0], 1.0, "a request waited on Redis")
        self.assertGreater(first, 0.5 * self.RATE * self.INSTANCES * seconds, "the load fell behind")
        self.assertLessEqual(retries, bound)
        origin.status = 200
        for p in fleet:
            self.assertLess(self.requests_all_answered(p.port(), 5), 0.5, "a request waited on Redis")
            self.assertEqual(self.safe_mode_warnings(p), 1)
        restore()
        for p in fleet:
            took = self.wait_state(p, 1, 2 * INTERVAL + MARGIN)
            self.assertLessEqual(took, 2 * INTERVAL + MARGIN)
        self.requests_all_answered(fleet[0].port(), 5)

    def test_redis_killed_then_restarted(self):
        redis = self.start_redis()
        origin, fleet = self.start_fleet(redis.port)
        self.check_fault(origin, fleet, [redis.stop], redis.start)
        for p in fleet:
            # While Redis was down every reconnect was refused at once, and
            # counted as such (not left to time out).
            self.assertGreater(self.errors(p, "connect"), 0)

    def test_redis_paused_then_continued(self):
        redis = self.start_redis()
        origin, fleet = self.start_fleet(redis.port)
        self.check_fault(origin, fleet, [lambda: redis.signal(signal.SIGSTOP)], lambda: redis.signal(signal.SIGCONT))
        for p in fleet:
            self.assertGreater(self.errors(p, "timeout"), 0)

    def test_redis_delayed_then_black_holed(self):
        redis = self.start_redis()
        relay = RedisRelay(redis.port, delay=0.5)
        self.addCleanup(relay.stop)
        origin, fleet = self.start_fleet(relay.port)

        def mode(m):
            return lambda: setattr(relay, "mode", m)
        self.check_fault(origin, fleet, [mode("delay"), mode("drop")], mode("pass"))
        for p in fleet:
            self.assertGreater(self.errors(p, "timeout"), 0)

    def test_redis_answering_errors(self):
        redis = self.start_redis()
        relay = RedisRelay(redis.port)
        self.addCleanup(relay.stop)
        origin, fleet = self.start_fleet(relay.port)
        self.check_fault(origin, fleet, [lambda: setattr(relay, "mode", "error")],
                         lambda: setattr(relay, "mode", "pass"))
        for p in fleet:
            self.assertGreater(self.errors(p, "error"), 0)


def p99(samples):
    """The nearest-rank 99th percentile."""
    s = sorted(samples)
    return s[max(0, math.ceil(0.99 * len(s)) - 1)]


class RelayFaultTest(FleetTest):
    """Redis behind a TCP relay that first adds 500 ms to every chunk (each
    round trip outlasts the 100 ms timeout), then swallows every byte, then
    passes again. Requests never wait for any of it: two instances of a
    fleet and two proxies without a fleet block take the same interleaved
    load, and the fleet's p99 while Redis is stalled stays within 10% of
    theirs, plus a floor."""

    # Loopback p99 is about 1 ms on an idle machine; a request that waited
    # on Redis would take the relay's 100+ ms. On a shared 2-core machine one
    # scheduling delay adds a few ms to a single request, and p99 is about
    # the 30th slowest of the requests below: what two identical proxies'
    # p99s differ by in one run is noise, not fleet. So on top of 10%, the
    # bound allows 2 ms or, when larger, what the two proxies without a
    # fleet block differed by in this same run. The floor is 5 ms: with
    # two test files running beside this one (ctest -j2), 2 ms was seen
    # exceeded by noise alone (7.7 ms against a 6.9 ms bound). What the
    # test is for is checked without noise too: no request of the fleet
    # instances took half the relay's delay.
    P99_FLOOR = 0.005
    HOLD = 4.0  # seconds in each stalled phase

    @staticmethod
    def quick_state(proxy):
        """onelayer_fleet_state of service svc (None without a fleet block),
        read without checking the whole exposition."""
        text = ops.admin(proxy, "GET", "/metrics").body.decode()
        m = re.search(r'^onelayer_fleet_state\{service="svc"\} (\S+)$', text, re.M)
        return float(m.group(1)) if m else None

    def wait_all(self, fleet, want, within, plain=()):
        """Seconds until every fleet instance's state is `want` (fails past
        within + 5). The proxies in `plain` are scraped as often, so that
        watching costs every proxy under load the same."""
        start = time.monotonic()

        def reached():
            for p in plain:
                self.quick_state(p)
            return all([self.quick_state(p) == want for p in fleet])
        self.assertTrue(wait_until(reached, timeout=within + 5, interval=0.05),
                        "not every instance's fleet state became %s" % want)
        return time.monotonic() - start

    def test_redis_delayed_then_black_holed_then_back(self):
        redis = self.start_redis()
        relay = RedisRelay(redis.port, delay=0.5)
        self.addCleanup(relay.stop)
        origin = self.start_origin(default=h.respond(200))
        fleet = [self.start_proxy(fleet_config(origin.port, relay.port)) for _ in range(2)]
        # The same route, retry and budget, without a fleet block.
        plain = [self.start_proxy(h.simple_config(
            origin.port, retry={"max_attempts": 2, "retry_on": [503], "backoff": {"base": "1ms", "cap": "2ms"}},
            upstream={"retry_budget": {"ratio": 0.1, "min_per_second": 5}})) for _ in range(2)]
        self.wait_all(fleet, 1, INTERVAL + MARGIN)
        load = InterleavedLoad([p.port() for p in fleet + plain])
        self.addCleanup(load.stop)
        time.sleep(0.5)

        def hold():  # scrapes every proxy alike while a phase lasts
            end = time.monotonic() + self.HOLD
            while time.monotonic() < end:
                states = [self.quick_state(p) for p in fleet + plain]
                self.assertEqual(states, [0, 0, None, None])
                time.sleep(0.2)

        stall_start = time.monotonic()
        relay.mode = "delay"
        took = self.wait_all(fleet, 0, STALE + INTERVAL + MARGIN, plain)
        self.assertLessEqual(took, STALE + INTERVAL + MARGIN)
        hold()
        timeouts_delayed = [self.errors(p, "timeout") for p in fleet]
        self.assertTrue(all(timeouts_delayed), timeouts_delayed)

        relay.mode = "drop"
        hold()
        # The black hole timed out round trips too (not just the delay's).
        for p, n in zip(fleet, timeouts_delayed):
            self.assertGreater(self.errors(p, "timeout"), n)
        self.assertGreater(relay.connections, len(fleet), "no instance reconnected")

        relay.mode = "pass"
        stall_end = time.monotonic()
        self.assertLessEqual(self.wait_all(fleet, 1, 2 * INTERVAL + MARGIN, plain), 2 * INTERVAL + MARGIN)
        load.stop()

        self.assertEqual(load.errors, [])
        for p in fleet:
            self.assertEqual(self.safe_mode_warnings(p), 1)
        fleet_a, fleet_b, plain_a, plain_b = load.between(stall_start, stall_end)
        self.assertGreater(len(fleet_a), 500, "too few requests while Redis was stalled")
        with_fleet, without = p99(fleet_a + fleet_b), p99(plain_a + plain_b)
        noise = abs(p99(plain_a) - p99(plain_b))
        bound = 1.1 * without + max(self.P99_FLOOR, noise)
        print("\nrelay fault: %d requests per proxy while stalled; p99 %.2f ms with the fleet block, %.2f ms"
              " without (%.2f and %.2f each; bound %.2f ms)"
              % (len(fleet_a), 1e3 * with_fleet, 1e3 * without, 1e3 * p99(plain_a), 1e3 * p99(plain_b), 1e3 * bound))
        self.assertLessEqual(with_fleet, bound)
        slowest = max(fleet_a + fleet_b)
        self.assertLess(slowest, relay.delay / 2, "a request waited on Redis (%.0f ms)" % (1e3 * slowest))


class HostileRedisTest(FleetTest):
    """A fake Redis that answers errors, wrong types, a gigabyte bulk or
    nothing: the instance stays local, keeps answering, and does not grow."""

    def run_fake(self, mode, reason):
        fake = FakeRedis(mode)
        self.addCleanup(fake.stop)
        origin = self.start_origin(default=h.respond(200))
        proxy = self.start_proxy(fleet_config(origin.port, fake.port))
        rss_before = proxy.rss_kb()
        self.assertTrue(wait_until(lambda: self.errors(proxy, reason) >= 2, timeout=STALE + 5 * INTERVAL + MARGIN),
                        ops.metrics(self, proxy))
        self.assertTrue(wait_until(lambda: self.state(proxy) == 0, timeout=STALE + INTERVAL + MARGIN))
        self.assertLess(self.requests_all_answered(proxy.port()), 0.5)
        self.assertLessEqual(self.safe_mode_warnings(proxy), 1)
        self.assertGreaterEqual(fake.connections, 2)  # it reconnects
        self.assertLess(proxy.rss_kb() - rss_before, RSS_GROWTH_KB)
        return fake, proxy

    def test_errors(self):
        self.run_fake("error", "error")

    def test_noauth(self):
        self.run_fake("noauth", "auth")

    def test_wrong_types(self):
        self.run_fake("wrongtype", "reply")

    def test_huge_bulk_length(self):
        fake, proxy = self.run_fake("huge", "too_large")
        # It hung up long before the 4 MiB the fake had to send per connection.
        self.assertLess(fake.sent / fake.connections, 4 << 20)

    def test_never_answering(self):
        self.run_fake("silent", "timeout")


class AuthTest(FleetTest):
    def test_password_from_file_is_used_and_never_shown(self):
        secret = "s3cret-%d" % os.getpid()
        redis = self.start_redis(extra=["--requirepass", secret])
        origin = self.start_origin(default=h.respond(200))
        path = os.path.join(redis.dir, "pw")
        with open(path, "w") as f:
            f.write(secret + "\n")
        proxy = self.start_proxy(fleet_config(origin.port, redis.port,
                                              fleet=fleet_block(redis.port, password_file=path)))
        self.wait_state(proxy, 1, INTERVAL + MARGIN)
        config = ops.admin(proxy, "GET", "/config").body.decode()
        self.assertIn("password_file: " + path, config)
        for text in (config, ops.admin(proxy, "GET", "/fleet").body.decode(), ops.metrics(self, proxy),
                     proxy.stderr(), proxy.stdout()):
            self.assertNotIn(secret, text)

    def test_wrong_password_stays_local_and_says_auth(self):
        redis = self.start_redis(extra=["--requirepass", "right"])
        origin = self.start_origin(default=h.respond(200))
        path = os.path.join(redis.dir, "pw")
        with open(path, "w") as f:
            f.write("wrong-password-xyz")
        proxy = self.start_proxy(fleet_config(origin.port, redis.port,
                                              fleet=fleet_block(redis.port, password_file=path)))
        self.assertTrue(wait_until(lambda: self.errors(proxy, "auth") >= 1, timeout=5))
        self.assertTrue(wait_until(lambda: self.state(proxy) == 0, timeout=STALE + INTERVAL + MARGIN))
        self.assertNotIn("wrong-password-xyz", proxy.stderr())


    def test_a_server_echoing_the_password_does_not_put_it_in_the_log(self):
        fake = FakeRedis("echo")
        self.addCleanup(fake.stop)
        origin = self.start_origin(default=h.respond(200))
        folder = tempfile.mkdtemp(prefix="onelayer-pw-")
        self.addCleanup(shutil.rmtree, folder, True)
        path = os.path.join(folder, "pw")
        with open(path, "w") as f:
            f.write("echoed-secret-123")
        proxy = self.start_proxy(fleet_config(origin.port, fake.port,
                                              fleet=fleet_block(fake.port, password_file=path)), log_level="debug")
        self.assertTrue(wait_until(lambda: self.errors(proxy, "auth") >= 2, timeout=5))
        self.assertIn("AUTH: ERR", proxy.stderr())  # every failure is logged at debug level
        self.assertNotIn("echoed-secret-123", proxy.stderr() + proxy.stdout())


class SentinelTest(FleetTest):
    """Two redis-servers and three sentinels: the instance finds the master
    through the sentinels, and follows the failover when the master dies."""

    def test_follows_a_failover(self):
        master = self.start_redis()
        replica = self.start_redis(extra=["--replicaof", "127.0.0.1", str(master.port)])
        sentinels = []
        for _ in range(3):
            s = Sentinel("main", master.port)
            self.addCleanup(s.cleanup)
            sentinels.append(s.start())
        # The sentinels know each other and the replica before the master dies.
        def ready():
            try:
                return all(s.command("SENTINEL", "CKQUORUM", "main").startswith(b"+OK 3 usable") for s in sentinels)
            except OSError:
                return False
        self.assertTrue(wait_until(ready, timeout=20, interval=0.2))
        origin = self.start_origin(default=h.respond(200))
        addrs = ["127.0.0.1:%d" % s.port for s in sentinels]
        proxy = self.start_proxy(fleet_config(origin.port, 0, fleet={
            "redis": {"sentinels": addrs, "master": "main"}, "sync_interval": "200ms", "timeout": "100ms",
            "stale_after": "600ms"}))
        self.wait_state(proxy, 1, INTERVAL + MARGIN)
        self.assertTrue(master.command("EXISTS", "onelayer:{svc}:m").startswith(b":1"))
        master.stop()
        self.wait_state(proxy, 0, STALE + INTERVAL + MARGIN)
        self.requests_all_answered(proxy.port(), 5)
        # The sentinels promote the replica; the instance syncs with it.
        self.wait_state(proxy, 1, 30)
        # It writes to the promoted replica: a key deleted there comes back.
        replica.command("DEL", "onelayer:{svc}:m")
        self.assertTrue(wait_until(lambda: replica.command("EXISTS", "onelayer:{svc}:m").startswith(b":1"),
                                   timeout=3))


class OtherLayersTest(FleetTest):
    """An inbound listener with fleet_service reports arrivals an outer layer
    already retried; the outbound instances' allowance to that service drops
    by what they spent."""

    def test_retries_by_other_layers_use_up_the_fleet_allowance(self):
        redis = self.start_redis()
        failing = CountingOrigin(503)
        self.addCleanup(failing.stop)
        healthy = self.start_origin(default=h.respond(200))
        # The outbound instance: min_per_second 5, ratio 0 -> 50 retries per 10 s for the fleet.
        outbound = self.start_proxy(fleet_config(failing.port, redis.port, budget={"ratio": 0}))
        # The inbound instance in front of the service, counting for it.
        inbound = self.start_proxy(h.simple_config(healthy.port, listener={"fleet_service": "svc"},
                                                   fleet=fleet_block(redis.port)))
        self.wait_state(outbound, 1, INTERVAL + MARGIN)
        # Before: a failing request is retried once.
        with h.Conn(outbound.port(), timeout=5) as c:
            self.assertEqual(c.request("GET", "/").status, 503)
        self.assertEqual(failing.totals(), (1, 1))
        # Another layer retried 60 requests to the service (an Envoy hop and
        # another onelayer owning retries), plus 10 first tries that count not.
        for i in range(70):
            hdr = [("x-envoy-attempt-count", "2")] if i < 30 else [("x-retry-attempt", "3")] if i < 60 else []
            with h.Conn(inbound.port(), timeout=5) as c:
                self.assertEqual(c.request("GET", "/", headers=hdr).status, 200)
        self.assertTrue(wait_until(lambda: ops.value(ops.metrics(self, outbound), "onelayer_fleet_retries_per_second",
                                                     service="svc", layer="other") == 6.0, timeout=3))
        # After: the 60 retries of other layers used up the fleet's 50.
        failing.reset()
        for _ in range(5):
            with h.Conn(outbound.port(), timeout=5) as c:
                self.assertEqual(c.request("GET", "/").status, 503)
        self.assertEqual(failing.totals(), (5, 0))
        view = ops.admin(outbound, "GET", "/fleet").body.decode()
        self.assertRegex(view, r"svc\s+synced\s+2\s")


if __name__ == "__main__":
    unittest.main()
