"""`onelayer --check` and `--version`: a valid file exits 0; an
invalid one exits 1 and prints every error as `file:line:col: path: message`."""

import os
import re
import shutil
import subprocess
import tempfile
import textwrap
import unittest

import harness as h

ERROR_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<path>[^:\s]*): (?P<msg>.+)$")

VALID = textwrap.dedent("""\
    layer_id: orders            # names this layer in retry headers
    admin:
      listen: 127.0.0.1:9901
    workers: 1
    drain_timeout: 10s
    propagate_baggage: true
    listeners:
      - name: outbound
        listen: 127.0.0.1:15001
        limits: { max_header_bytes: 16KiB, max_body_bytes: 16MiB,
                  header_timeout: 10s, idle_timeout: 60s, max_connections: 10000 }
        routes:
          - name: inventory-read
            match:
              host: inventory
              path_prefix: /items
              methods: [GET, HEAD]
            upstream: inventory
            timeout: 1500ms
            inner_hops: forbid
            retry:
              max_attempts: 3
              per_try_timeout: 500ms
              retry_on: [connect-failure, reset, timeout, 429, 502, 503, 504]
              backoff: { base: 50ms, cap: 1s, jitter: full }
              retry_after: { honor: true, max: 5s }
              idempotency_key: Idempotency-Key
              buffer_limit: 64KiB
    upstreams:
      - name: inventory
        endpoints: [127.0.0.1:8081, "inventory.svc:8080", "[::1]:8082"]
        connect_timeout: 250ms
        pool: { max_idle: 64, idle_timeout: 30s }
        retry_budget: { ratio: 0.1, min_per_second: 5 }
        circuit_breaker: { consecutive_failures: 5, open_for: 10s, half_open_probes: 1 }
    """)

MINIMAL = textwrap.dedent("""\
    listeners:
      - name: main
        listen: 127.0.0.1:0
        routes:
          - name: all
            upstream: u
    upstreams:
      - name: u
        endpoints: [127.0.0.1:8080]
    """)

# Four independent errors; line numbers are 1-based.
INVALID = textwrap.dedent("""\
    layer_id: t
    listeners:
      - name: main
        listen: 127.0.0.1:0
        bogus_key: 1
        routes:
          - name: r
            upstream: nowhere
            timeout: 10parsecs
            retry:
              backoff: { base: 100ms, cap: 50ms }
    upstreams:
      - name: origin
        endpoints: ["127.0.0.1:1"]
    """)
EXPECTED = [  # (line, path, a word the message must contain)
    (5, "listeners[0].bogus_key", "unknown"),
    (8, "listeners[0].routes[0].upstream", "nowhere"),
    (9, "listeners[0].routes[0].timeout", ""),
    (11, "listeners[0].routes[0].retry.backoff.cap", "base"),
]


class ConfigCheckTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="onelayer-check-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def check(self, path):
        code, out, err = h.run_onelayer(["--check", "--config", path])
        return code, out + err

    def error_lines(self, output, basename):
        found = []
        for line in output.splitlines():
            m = ERROR_LINE.match(line.strip())
            if m and m.group("file").endswith(basename):
                found.append(m)
        return found

    def test_valid_full_example_exits_0(self):
        code, output = self.check(self.write("full.yaml", VALID))
        self.assertEqual(code, 0, output)

    def test_valid_minimal_file_exits_0(self):
        code, output = self.check(self.write("minimal.yaml", MINIMAL))
        self.assertEqual(code, 0, output)

    def test_invalid_file_exits_1_and_reports_every_error_with_position_and_path(self):
        code, output = self.check(self.write("bad.yaml", INVALID))
        print("\n--check output:\n" + output)
        self.assertEqual(code, 1, output)
        errors = self.error_lines(output, "bad.yaml")
        by_path = {m.group("path"): m for m in errors}
        for line, path, word in EXPECTED:
            self.assertIn(path, by_path, "no error for %s in:\n%s" % (path, output))
            m = by_path[path]
            self.assertEqual(int(m.group("line")), line, "line of %s: %s" % (path, m.group(0)))
            self.assertGreaterEqual(int(m.group("col")), 1)
            self.assertIn(word.lower(), m.group("msg").lower(), m.group(0))

    def test_unknown_key_column_points_at_the_key(self):
        code, output = self.check(self.write("bad.yaml", INVALID))
        m = {m.group("path"): m for m in self.error_lines(output, "bad.yaml")}.get(
            "listeners[0].bogus_key")
        self.assertIsNotNone(m, output)
        self.assertEqual(int(m.group("col")), 5, m.group(0))

    def test_yaml_syntax_error_exits_1_with_position(self):
        code, output = self.check(self.write("syntax.yaml", "listeners:\n  - name: [unclosed\n"))
        self.assertEqual(code, 1, output)
        self.assertRegex(output, r"syntax\.yaml:\d+:\d+: ")

    def test_missing_file_exits_1_and_names_it(self):
        path = os.path.join(self.dir, "does-not-exist.yaml")
        code, output = self.check(path)
        self.assertEqual(code, 1, output)
        self.assertIn("does-not-exist.yaml", output)

    def test_repository_config_is_valid(self):
        code, output = self.check(os.path.join(h.SOURCE_DIR, "config", "onelayer.yaml"))
        self.assertEqual(code, 0, output)

    def test_version_prints_a_version_and_exits_0(self):
        code, out, err = h.run_onelayer(["--version"])
        print("\n--version: %r" % (out + err).strip())
        self.assertEqual(code, 0, out + err)
        self.assertRegex(out + err, r"\d+\.\d+")

    def test_version_names_the_allocator_the_binary_links(self):
        code, out, err = h.run_onelayer(["--version"])
        self.assertEqual(code, 0, out + err)
        m = re.search(r"\(allocator: (mimalloc|libc malloc)\)", out)
        self.assertIsNotNone(m, out)
        linked = subprocess.run(["ldd", h.onelayer_bin()], capture_output=True, text=True).stdout
        print("\n%s; ldd: %s" % (m.group(0), "libmimalloc" in linked))
        self.assertEqual(m.group(1) == "mimalloc", "libmimalloc" in linked, linked)

    def test_version_says_how_nghttp2_is_linked_and_the_build_links_it_so(self):
        code, out, err = h.run_onelayer(["--version"])
        self.assertEqual(code, 0, out + err)
        m = re.search(r"^nghttp2 (\d+\.\d+\.\d+), (linked into the binary|shared library)$", out, re.M)
        self.assertIsNotNone(m, out)
        linked = subprocess.run(["ldd", h.onelayer_bin()], capture_output=True, text=True).stdout
        print("\n%s; ldd: %s" % (m.group(0), "libnghttp2" in linked))
        self.assertEqual(m.group(2) == "shared library", "libnghttp2" in linked, linked)
        # What CMake was asked for (ONELAYER_STATIC_NGHTTP2, on by default)
        # is what the binary got.
        wanted = os.environ.get("ONELAYER_STATIC_NGHTTP2")
        if wanted is not None:
            self.assertEqual(wanted == "1", m.group(2) == "linked into the binary", out)
            self.assertEqual(wanted == "1", "libnghttp2" not in linked, linked)


if __name__ == "__main__":
    unittest.main()
