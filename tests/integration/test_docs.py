"""The documentation stands on its own and matches the code: README.md stays
short and keeps its two commands, every relative link in README.md and
docs/ reaches an existing file and heading, the README's first config passes
`onelayer --check`, every metric family the code exports is documented, and
no text in the repository points at documents that are not in it."""

import os
import re
import subprocess
import tempfile
import unittest

import harness as h

SOURCE = os.environ.get("ONELAYER_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
README = os.path.join(SOURCE, "README.md")
DOCS = os.path.join(SOURCE, "docs")

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
HEADING = re.compile(r"^#{1,6} (.+?)\s*#*$", re.M)
# Built from pieces so this file does not match itself.
OUTSIDE_REFERENCE = re.compile("PRODUCT" + r"\.md|LLHTTP" + r"\.md|\b[Ii]ssues? #?\d")
TEXT_SUFFIXES = (".md", ".py", ".sh", ".cc", ".h", ".c", ".txt", ".yaml", ".yml", ".json", ".dict", ".cmake")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def doc_files():
    return [README] + sorted(os.path.join(DOCS, n) for n in os.listdir(DOCS) if n.endswith(".md"))


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return "".join(c for c in text if c.isalnum() or c in " -_").replace(" ", "-")


def anchors(path):
    seen = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", read(path))):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def repo_text_files():
    for dirpath, dirnames, filenames in os.walk(SOURCE):
        rel = os.path.relpath(dirpath, SOURCE)
        dirnames[:] = [d for d in dirnames
                       if not d.startswith(".git") and not (rel == "." and d.startswith("build"))
                       and d != "__pycache__"]
        for name in filenames:
            if name.endswith(TEXT_SUFFIXES) or name in ("Dockerfile", "CMakeLists.txt", "run"):
                yield os.path.join(dirpath, name)


class DocsTest(unittest.TestCase):
    def test_readme_is_short_and_keeps_the_two_commands(self):
        text = read(README)
        self.assertLessEqual(len(text.splitlines()), 300, "README.md is meant to be read in ten minutes")
        blocks = re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S)
        lines = {line.strip() for block in blocks for line in block.splitlines()}
        for command in ("bash deploy/run-demo.sh", "bash deploy/test.sh"):
            self.assertIn(command, lines, f"README.md must show `{command}` in a sh block")
        for path in doc_files()[1:]:
            self.assertIn("docs/" + os.path.basename(path), text, "README.md must point to every document")

    def test_every_relative_link_reaches_a_file_and_heading(self):
        broken = []
        for path in doc_files():
            for target in LINK.findall(FENCE.sub("", read(path))):
                if re.match(r"[a-z]+:", target):
                    continue  # http(s), mailto: not checked here
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                where = f"{os.path.relpath(path, SOURCE)}: {target}"
                if not os.path.exists(dest):
                    broken.append(f"{where} (no such file)")
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    broken.append(f"{where} (no such heading)")
        self.assertEqual(broken, [])

    def test_the_readme_first_config_passes_check(self):
        binary = h.onelayer_bin()
        if not binary:
            self.skipTest("ONELAYER_BIN is not set to an executable")
        m = re.search(r"^## A first config$.*?^```yaml\n(.*?)^```", read(README), re.M | re.S)
        self.assertIsNotNone(m, "README.md has a first config in a yaml block")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "first.yaml")
            with open(path, "w") as f:
                f.write(m.group(1))
            r = subprocess.run([binary, "--check", "--config", path], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ok (1 listener(s), 1 upstream(s))", r.stdout)

    def test_every_exported_metric_family_is_documented(self):
        names = set()
        for rel in ("proxy/core/metrics/metrics.cc", "proxy/shell/proxy/runtime.cc"):
            names |= set(re.findall(r'"(onelayer_[a-z_]+)"', read(os.path.join(SOURCE, rel))))
        families = {re.sub(r"_(bucket|sum|count)$", "", n) for n in names}
        self.assertIn("onelayer_amplification_ratio", families)  # the scan found the code's names
        documented = set(re.findall(r"`(onelayer_[a-z_]+)", read(os.path.join(DOCS, "operations.md"))))
        self.assertEqual(sorted(families - documented), [])

    def test_no_text_refers_to_documents_outside_the_repository(self):
        found = []
        for path in repo_text_files():
            try:
                text = read(path)
            except UnicodeDecodeError:
                continue
            for n, line in enumerate(text.splitlines(), 1):
                if OUTSIDE_REFERENCE.search(line):
                    found.append(f"{os.path.relpath(path, SOURCE)}:{n}: {line.strip()}")
        self.assertEqual(found, [])


if __name__ == "__main__":
    unittest.main()
