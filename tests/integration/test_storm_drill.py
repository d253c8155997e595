"""deploy/storm-drill.py against a real onelayer under load: it starts a drill
through the admin port, samples /metrics, ends the drill, prints the table
and the summary, writes drill.tsv (and drill.svg with gnuplot), and with
--max-ratio fails exactly when retries amplify the outage."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import harness as h
from harness import IntegrationTest

SCRIPT = os.path.join(h.SOURCE_DIR, "deploy", "storm-drill.py")
RETRY = {"max_attempts": 3, "backoff": {"base": "1ms", "cap": "5ms", "jitter": "none"}}


class StormDrillScriptTest(IntegrationTest):
    def run_drill(self, budget, max_ratio):
        origin = self.start_origin(default=h.respond(200, body=b"ok"))
        proxy = self.proxy_for(origin, retry=RETRY, timeout="5s", upstream={"retry_budget": budget})
        stop = threading.Event()

        def load():
            while not stop.is_set():
                with h.Conn(proxy.port()) as c:
                    c.request("GET", "/")
                time.sleep(0.01)
        t = threading.Thread(target=load)
        t.start()
        self.addCleanup(lambda: (stop.set(), t.join()))
        out = tempfile.mkdtemp(prefix="onelayer-drill-")
        self.addCleanup(shutil.rmtree, out, True)
        p = subprocess.run([sys.executable, SCRIPT, "--admin", "127.0.0.1:%d" % proxy.admin_port,
                            "--upstream", "origin", "--status", "503", "--for", "2s", "--interval", "0.5",
                            "--before", "1", "--after", "1", "--out", out, "--max-ratio", str(max_ratio)],
                           capture_output=True, text=True, timeout=60)
        stop.set()
        t.join()
        after = origin.count()
        with h.Conn(proxy.port()) as c:
            self.assertEqual(c.request("GET", "/").status, 200, "the drill was ended")
        self.assertEqual(origin.count(), after + 1)
        self.assertIn("during the drill:", p.stdout, p.stdout + p.stderr)
        with open(os.path.join(out, "drill.tsv")) as f:
            phases = [line.split("\t")[1] for line in f if not line.startswith("#")]
        self.assertIn("before", phases)
        self.assertIn("drill", phases)
        self.assertIn("after", phases)
        if shutil.which("gnuplot"):
            self.assertTrue(os.path.getsize(os.path.join(out, "drill.svg")) > 0)
        return p

    def test_a_successes_budget_keeps_the_drill_close_to_one_attempt_per_request(self):
        p = self.run_drill({"mode": "successes", "ratio": 0.1, "min_per_second": 1}, max_ratio=1.2)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_an_ample_budget_triples_the_attempts_and_max_ratio_fails(self):
        p = self.run_drill({"ratio": 1.0, "min_per_second": 1000}, max_ratio=1.2)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        # Every request makes its 3 attempts; requests in flight at the
        # drill's edges can land in the window with only part of theirs.
        m = re.search(r"([0-9.]+) attempts per request", p.stdout)
        self.assertIsNotNone(m, p.stdout)
        self.assertGreaterEqual(float(m.group(1)), 2.9)
        self.assertLessEqual(float(m.group(1)), 3.1)


if __name__ == "__main__":
    unittest.main()
