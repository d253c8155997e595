"""tests/run_unittest.py, the runner ctest calls for every Python test file:
a skip is reported to ctest as skipped (exit 77), never as passed, and fails
under CI=true; failures, errors and a file without tests fail."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

import harness as h

RUNNER = os.path.join(h.SOURCE_DIR, "tests", "run_unittest.py")

MODULES = {
    "m_pass": """
        class T(unittest.TestCase):
            def test_a(self):
                self.assertEqual(1 + 1, 2)
    """,
    "m_skip": """
        class T(unittest.TestCase):
            def test_a(self):
                pass
            def test_b(self):
                self.skipTest("tool X not installed")
    """,
    "m_class_skip": """
        @unittest.skip("whole class")
        class T(unittest.TestCase):
            def test_a(self):
                pass
    """,
    "m_setup_class_skip": """
        class T(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                raise unittest.SkipTest("podman cannot build here")
            def test_a(self):
                pass
    """,
    "m_fail": """
        class T(unittest.TestCase):
            def test_a(self):
                self.assertEqual(1, 2)
            def test_b(self):
                self.skipTest("also a skip")
    """,
    "m_error": """
        class T(unittest.TestCase):
            def setUp(self):
                raise RuntimeError("broken fixture")
            def test_a(self):
                pass
    """,
    "m_empty": """
        class T(unittest.TestCase):
            pass
    """,
}


class RunUnittestTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="onelayer-runner-")
        for name, body in MODULES.items():
            with open(os.path.join(cls.dir, name + ".py"), "w") as f:
                f.write("import unittest\n" + textwrap.dedent(body))

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["rm", "-rf", cls.dir], check=True)

    def run_module(self, module, ci):
        env = {k: v for k, v in os.environ.items() if k != "CI"}
        if ci:
            env["CI"] = "true"
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        p = subprocess.run([sys.executable, RUNNER, module], cwd=self.dir, env=env,
                           capture_output=True, text=True, timeout=60)
        return p.returncode, p.stderr

    def test_all_passing_exits_0_with_or_without_ci(self):
        for ci in (False, True):
            with self.subTest(ci=ci):
                code, err = self.run_module("m_pass", ci)
                self.assertEqual(code, 0, err)
                self.assertIn("test_a", err)

    def test_a_skip_exits_77_or_fails_under_ci_and_names_the_reason(self):
        for module in ("m_skip", "m_class_skip", "m_setup_class_skip"):
            for ci, want_code, want_text in ((False, 77, "reported to ctest as skipped"),
                                             (True, 1, "skips are failures under CI=true")):
                with self.subTest(module=module, ci=ci):
                    code, err = self.run_module(module, ci)
                    self.assertEqual(code, want_code, err)
                    self.assertIn(want_text, err)
        _, err = self.run_module("m_skip", False)
        self.assertIn("1 skipped, 2 run", err)
        self.assertIn("tool X not installed", err)

    def test_failures_errors_and_no_tests_exit_1(self):
        for module in ("m_fail", "m_error", "m_empty"):
            for ci in (False, True):
                with self.subTest(module=module, ci=ci):
                    code, err = self.run_module(module, ci)
                    self.assertEqual(code, 1, err)
        _, err = self.run_module("m_empty", False)
        self.assertIn("no tests were found", err)

    def test_every_python_test_in_this_build_reports_skips_to_ctest(self):
        # Exit 77 only becomes "Skipped" in ctest's summary through the
        # SKIP_RETURN_CODE property: check the tests this build registered.
        build = os.environ.get("ONELAYER_BUILD_DIR")
        self.assertTrue(build and os.path.isdir(build), "ONELAYER_BUILD_DIR (set by ctest) is %r" % build)
        p = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        tests = json.loads(p.stdout)["tests"]
        python = [t for t in tests if any("python" in os.path.basename(c) for c in t["command"][:1])]
        self.assertGreater(len(python), 10)
        for t in python:
            with self.subTest(test=t["name"]):
                props = {q["name"]: q["value"] for q in t.get("properties", [])}
                if os.path.realpath(t["command"][1]) == os.path.realpath(RUNNER):
                    self.assertEqual(props.get("SKIP_RETURN_CODE"), 77)
                else:
                    # soak.py is a script of its own, not a unittest file.
                    self.assertNotIn("unittest", t["command"])

if __name__ == "__main__":
    unittest.main()
