"""The Prometheus text-format checker other tests rely on accepts valid
expositions and names each kind of mistake."""

import os
import unittest

import promcheck

GOOD = """# HELP onelayer_requests_total Downstream requests answered.
# TYPE onelayer_requests_total counter
onelayer_requests_total{listener="outbound",route="r\\"q\\\\x\\ny",code="200"} 10
onelayer_requests_total{listener="outbound",route="r",code="503"} 1 1700000000000
# HELP onelayer_amplification_ratio Attempts per request.
# TYPE onelayer_amplification_ratio gauge
onelayer_amplification_ratio{route="r"} 3
onelayer_amplification_ratio{route="s"} NaN
# HELP onelayer_request_duration_seconds Request duration.
# TYPE onelayer_request_duration_seconds histogram
onelayer_request_duration_seconds_bucket{route="r",le="0.1"} 1
onelayer_request_duration_seconds_bucket{route="r",le="1"} 4
onelayer_request_duration_seconds_bucket{route="r",le="+Inf"} 5
onelayer_request_duration_seconds_sum{route="r"} 3.5
onelayer_request_duration_seconds_count{route="r"} 5
# a free comment
# HELP onelayer_build_info Build.
onelayer_build_info 1
"""


def problems_of(text):
    return promcheck.check(text, use_promtool=False)


class PromcheckTest(unittest.TestCase):
    def test_valid_exposition_has_no_problems(self):
        self.assertEqual(problems_of(GOOD), [])

    def test_valid_exposition_passes_promtool_when_installed(self):
        if not os.path.exists(promcheck.PROMTOOL):
            self.skipTest("promtool not installed")
        self.assertEqual(promcheck.check(GOOD), [])

    def test_value_finds_a_sample_by_labels(self):
        self.assertEqual(promcheck.value(GOOD, "onelayer_requests_total", code="503"), 1)
        self.assertEqual(promcheck.value(GOOD, "onelayer_requests_total", route='r"q\\x\ny'), 10)
        self.assertIsNone(promcheck.value(GOOD, "onelayer_requests_total", code="404"))
        with self.assertRaises(ValueError):
            promcheck.value(GOOD, "onelayer_requests_total", listener="outbound")

    def assert_problem(self, text, fragment):
        problems = problems_of(text)
        self.assertTrue(any(fragment in p for p in problems), "wanted %r in %r" % (fragment, problems))

    def test_missing_final_newline_is_reported(self):
        self.assert_problem(GOOD.rstrip("\n"), "newline")

    def test_crlf_line_endings_are_reported(self):
        self.assert_problem(GOOD.replace("\n", "\r\n"), "CR")

    def test_bad_label_escape_is_reported(self):
        self.assert_problem('m{a="x\\t"} 1\n', "bad escape")

    def test_unquoted_label_value_is_reported(self):
        self.assert_problem("m{a=x} 1\n", "expected")

    def test_reserved_and_repeated_label_names_are_reported(self):
        self.assert_problem('m{__a="x"} 1\n', "reserved")
        self.assert_problem('m{a="x",a="y"} 1\n', "repeated")

    def test_bad_value_and_timestamp_are_reported(self):
        self.assert_problem("m one\n", "not a float")
        self.assert_problem("m 1 12.5\n", "timestamp")
        self.assert_problem("m  1\n", "one space")

    def test_duplicate_series_is_reported(self):
        self.assert_problem('m{a="1"} 1\nm{a="1"} 2\n', "twice")

    def test_non_contiguous_family_is_reported(self):
        self.assert_problem("a 1\nb 1\na 2\n", "contiguous")

    def test_type_after_samples_and_repeated_help_are_reported(self):
        self.assert_problem("m 1\n# TYPE m gauge\n", "after its samples")
        self.assert_problem("# HELP m x\n# HELP m y\nm 1\n", "second HELP")
        self.assert_problem("# TYPE m gauges\nm 1\n", "unknown type")

    def test_family_without_help_is_reported(self):
        self.assert_problem("# TYPE m gauge\nm 1\n", "no HELP")

    def test_negative_counter_and_missing_total_suffix_are_reported(self):
        self.assert_problem("# TYPE m_total counter\nm_total -1\n", "counter m_total has value")
        self.assert_problem("# TYPE m counter\nm 1\n", "_total")

    def test_histogram_mistakes_are_reported(self):
        head = "# TYPE h histogram\n"
        self.assert_problem(head + 'h_bucket{le="1"} 1\nh_sum 1\nh_count 1\n', "+Inf")
        self.assert_problem(head + 'h_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n',
                            "cumulative")
        self.assert_problem(head + 'h_bucket{le="+Inf"} 2\nh_sum 1\nh_count 3\n', "differs")
        self.assert_problem(head + 'h_bucket{le="+Inf"} 2\nh_count 2\n', "no _sum")
        self.assert_problem(head + 'h_bucket{le="x"} 2\nh_sum 1\nh_count 2\n', "not a float")
        self.assert_problem(head + "h 2\n", "sample named h")


if __name__ == "__main__":
    unittest.main()
