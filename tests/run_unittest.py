"""Runs Python unittest modules for ctest, so that a skip is never a pass.

    python3 tests/run_unittest.py MODULE [MODULE...]

Modules are imported from the working directory (ctest's WORKING_DIRECTORY).
Exit status:
  0   every test ran and passed;
  1   a failure, an error, an unexpected success, or no test at all;
  77  no failure, but at least one test was skipped. CMake registers the
      tests with SKIP_RETURN_CODE 77, so ctest reports them as skipped in
      its summary instead of counting them as passed;
  1   also for a skip when CI=true: in CI every test must run (the tools the
      tests need are in `deploy/install-deps.sh test`).
The skip reasons are printed at the end either way.
"""

import os
import sys
import unittest

SKIPPED = 77


def outcome(result, ci):
    """(exit status, lines to print) for a finished unittest result."""
    lines = []
    # A class skipped in setUpClass counts no test run, only the skip.
    if result.testsRun == 0 and not result.skipped:
        return 1, ["run_unittest: no tests were found"]
    if not result.wasSuccessful():
        return 1, lines
    if result.skipped:
        verdict = "FAILED: skips are failures under CI=true" if ci else "reported to ctest as skipped"
        lines.append("run_unittest: %d skipped, %d run (%s):" % (
            len(result.skipped), result.testsRun, verdict))
        lines += ["  %s: %s" % (test.id(), reason) for test, reason in result.skipped]
        return (1 if ci else SKIPPED), lines
    return 0, lines


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    sys.path.insert(0, os.getcwd())
    suite = unittest.defaultTestLoader.loadTestsFromNames(argv[1:])
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(suite)
    code, lines = outcome(result, os.environ.get("CI", "").lower() == "true")
    for line in lines:
        sys.stderr.write(line + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
