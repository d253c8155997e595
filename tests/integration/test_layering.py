"""The build's layering check (cmake/check_layering.py) holds the code to
proxy/packages.txt: the tree as committed passes with no exception listed,
and an include that goes up the layers, a core file that includes an I/O
library, or a library header outside the packages that link it fails the
check with the file and the rule named, unless it is listed with its reason
in proxy/layering_exceptions.txt. Each case runs on a copy of proxy/."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.environ.get("ONELAYER_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CHECK = os.path.join(SOURCE, "cmake", "check_layering.py")


def run_check(src):
    return subprocess.run([sys.executable, CHECK, src], capture_output=True, text=True, timeout=60)


def listed_exceptions(path):
    with open(path) as f:
        return [line for line in f if line.split("#", 1)[0].strip()]


class LayeringCheck(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="onelayer-layering-")
        shutil.copytree(os.path.join(SOURCE, "proxy"), os.path.join(self.tmp, "proxy"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def append_include(self, rel, include):
        with open(os.path.join(self.tmp, "proxy", rel), "a") as f:
            f.write(f"\n#include {include}\n")

    def test_the_committed_tree_passes_with_no_exception_listed(self):
        r = run_check(SOURCE)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(listed_exceptions(os.path.join(SOURCE, "proxy", "layering_exceptions.txt")), [])

    def test_a_codec_that_includes_the_exchange_fails_with_the_file_and_the_rule(self):
        self.append_include("shell/http1/http1_server_connection.cc", '"shell/proxy/exchange.h"')
        r = run_check(self.tmp)
        self.assertEqual(r.returncode, 1)
        self.assertIn("proxy/shell/http1/http1_server_connection.cc: includes shell/proxy/exchange.h: "
                      "shell/http1 may not include shell/proxy", r.stderr)
        self.assertIn("1 include(s) go up the layers", r.stderr)

    def test_the_two_codecs_may_not_include_each_other(self):
        self.append_include("shell/http2/h2_server_connection.cc", '"shell/http1/http1_server_connection.h"')
        r = run_check(self.tmp)
        self.assertEqual(r.returncode, 1)
        self.assertIn("shell/http2 may not include shell/http1", r.stderr)

    def test_the_core_may_not_include_the_shell_or_an_io_library(self):
        self.append_include("core/retry/retry_budget.cc", '"shell/io/conn.h"')
        self.append_include("core/upstream/endpoint_balancer.cc", "<uv.h>")
        r = run_check(self.tmp)
        self.assertEqual(r.returncode, 1)
        self.assertIn("core/retry may not include shell/io", r.stderr)
        self.assertIn("proxy/core/upstream/endpoint_balancer.cc: includes <uv.h>: the core does no I/O", r.stderr)
        self.assertIn("2 include(s) go up the layers", r.stderr)

    def test_a_library_header_outside_the_packages_that_link_it_fails(self):
        self.append_include("shell/proxy/exchange.cc", "<nghttp2/nghttp2.h>")
        r = run_check(self.tmp)
        self.assertEqual(r.returncode, 1)
        self.assertIn("only packages that link nghttp2 include it", r.stderr)

    def test_an_include_down_the_layers_passes(self):
        self.append_include("shell/proxy/exchange.cc", '"shell/stream/upstream_stream.h"')
        self.append_include("core/retry/retry_budget.cc", '"core/base/clock.h"')
        self.assertEqual(run_check(self.tmp).returncode, 0)

    def test_a_listed_exception_passes_and_a_stale_one_is_pointed_out(self):
        self.append_include("shell/http1/http1_server_connection.cc", '"shell/proxy/exchange.h"')
        with open(os.path.join(self.tmp, "proxy", "layering_exceptions.txt"), "a") as f:
            f.write("shell/http1/http1_server_connection.cc -> shell/proxy/exchange.h   # a test's reason\n")
            f.write("shell/http2/h2_session.cc -> shell/server/worker.h   # no longer occurs\n")
        r = run_check(self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("lists 'shell/http2/h2_session.cc -> shell/server/worker.h', which no longer occurs",
                      r.stdout)


if __name__ == "__main__":
    unittest.main()
