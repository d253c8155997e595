"""Strict checker for the Prometheus text exposition format 0.0.4.

    import promcheck
    problems = promcheck.check(text)          # [] when the exposition is valid
    fams = promcheck.parse(text)              # {family: Family}
    promcheck.value(text, "onelayer_requests_total", code="200", route="r")

check() applies the format rules itself (so it works without Prometheus
installed) and, when /usr/bin/promtool exists, also runs `promtool check
metrics` and reports what it says. Standard library only.

Rules enforced (https://prometheus.io/docs/instrumenting/exposition_formats/):
- every line ends with LF, including the last; no CR;
- `# HELP name text` and `# TYPE name type` at most once per family, TYPE
  before the family's first sample, type one of counter gauge histogram
  summary untyped; HELP escapes only \\ and \\n;
- sample: metric name [a-zA-Z_:][a-zA-Z0-9_:]*, optional {labels}, one space,
  a float (NaN, +Inf, -Inf allowed), optional integer timestamp;
- label names [a-zA-Z_][a-zA-Z0-9_]*, not starting with __, not repeated;
  label values double-quoted with escapes \\\\ \\" \\n only;
- the samples of a family are contiguous; no series (name + label set)
  appears twice;
- every family has a HELP line (promtool's lint asks for one too);
- counters are >= 0 and not NaN; a counter family name should end in _total
  (promtool's lint says the same);
- histograms: each series has buckets with a float `le`, a `+Inf` bucket,
  cumulative (non-decreasing) bucket counts in increasing `le` order, `_sum`,
  and `_count` equal to the `+Inf` bucket; no sample named like the family
  itself; summaries: `quantile` label in [0, 1], `_sum` and `_count`.
"""

import math
import os
import re
import subprocess
import sys

PROMTOOL = "/usr/bin/promtool"

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")
FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|Inf|inf)|NaN|nan")
TIMESTAMP = re.compile(r"-?\d+")


class Sample:
    def __init__(self, name, labels, value, line_no):
        self.name = name
        self.labels = labels  # dict
        self.value = value    # float
        self.line_no = line_no

    def __repr__(self):
        return "Sample(%s%r=%r)" % (self.name, self.labels, self.value)


class Family:
    def __init__(self, name):
        self.name = name
        self.type = None
        self.help = None
        self.samples = []

    def __repr__(self):
        return "Family(%s, %s, %d samples)" % (self.name, self.type, len(self.samples))


def parse_float(text):
    if not FLOAT.fullmatch(text):
        raise ValueError("not a float: %r" % text)
    return float(text)


def _parse_labels(text, pos, line_no, problems):
    """Parses `{...}` starting at text[pos] == '{'. Returns (labels, pos after '}')."""
    labels = {}
    pos += 1
    while True:
        if pos < len(text) and text[pos] == "}":
            return labels, pos + 1
        m = LABEL_NAME.match(text, pos)
        if not m:
            raise ValueError("bad label name at column %d" % (pos + 1))
        name = m.group(0)
        pos = m.end()
        if name.startswith("__"):
            problems.append("line %d: label name %r is reserved (starts with __)" % (line_no, name))
        if name in labels:
            problems.append("line %d: label %r repeated" % (line_no, name))
        if text[pos:pos + 2] != '="':
            raise ValueError("expected =\" after label %r" % name)
        pos += 2
        value = []
        while True:
            if pos >= len(text):
                raise ValueError("unterminated label value for %r" % name)
            c = text[pos]
            if c == "\\":
                nxt = text[pos + 1:pos + 2]
                if nxt == "\\":
                    value.append("\\")
                elif nxt == '"':
                    value.append('"')
                elif nxt == "n":
                    value.append("\n")
                else:
                    raise ValueError("bad escape \\%s in label %r" % (nxt, name))
                pos += 2
            elif c == '"':
                pos += 1
                break
            else:
                value.append(c)
                pos += 1
        labels[name] = "".join(value)
        if pos < len(text) and text[pos] == ",":
            pos += 1
            continue
        if pos < len(text) and text[pos] == "}":
            return labels, pos + 1
        raise ValueError("expected , or } after label %r" % name)


def _parse_sample(line, line_no, problems):
    m = METRIC_NAME.match(line)
    if not m:
        raise ValueError("bad metric name")
    name = m.group(0)
    pos = m.end()
    labels = {}
    if pos < len(line) and line[pos] == "{":
        labels, pos = _parse_labels(line, pos, line_no, problems)
    rest = line[pos:]
    if not rest.startswith(" ") or rest.startswith("  "):
        raise ValueError("expected exactly one space before the value")
    parts = rest[1:].split(" ")
    if len(parts) not in (1, 2) or any(p == "" for p in parts):
        raise ValueError("expected `value [timestamp]` after the name, got %r" % rest[1:])
    value = parse_float(parts[0])
    if len(parts) == 2 and not TIMESTAMP.fullmatch(parts[1]):
        raise ValueError("bad timestamp %r" % parts[1])
    return Sample(name, labels, value, line_no)


def _family_of(sample_name, families):
    """The family a sample belongs to: histogram/summary suffixes map to their base."""
    for suffix, kinds in (("_bucket", ("histogram",)), ("_sum", ("histogram", "summary")),
                          ("_count", ("histogram", "summary"))):
        if sample_name.endswith(suffix):
            base = sample_name[:-len(suffix)]
            fam = families.get(base)
            if fam is not None and fam.type in kinds:
                return base
    return sample_name


def _check_help(text, line_no, problems):
    i = 0
    while i < len(text):
        if text[i] == "\\":
            if text[i + 1:i + 2] not in ("\\", "n"):
                problems.append("line %d: HELP has a bad escape \\%s" % (line_no, text[i + 1:i + 2]))
            i += 2
        else:
            i += 1


def _parse(text, problems):
    families = {}
    order = []
    if text and not text.endswith("\n"):
        problems.append("exposition does not end with a newline")
    if "\r" in text:
        problems.append("exposition contains CR characters (lines must end with LF only)")
    current = None  # family whose samples are being read
    finished = set()  # families whose sample block has ended
    seen_series = set()

    def family(name):
        if name not in families:
            families[name] = Family(name)
            order.append(name)
        return families[name]

    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line_no, line in enumerate(lines, 1):
        if line.strip() == "":
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[0] == "#" and parts[1] in ("HELP", "TYPE"):
                kind, name = parts[1], parts[2]
                if not METRIC_NAME.fullmatch(name):
                    problems.append("line %d: bad metric name %r in %s" % (line_no, name, kind))
                    continue
                fam = family(name)
                if kind == "HELP":
                    if fam.help is not None:
                        problems.append("line %d: second HELP for %s" % (line_no, name))
                    fam.help = parts[3] if len(parts) == 4 else ""
                    _check_help(fam.help, line_no, problems)
                else:
                    typ = parts[3] if len(parts) == 4 else ""
                    if fam.type is not None:
                        problems.append("line %d: second TYPE for %s" % (line_no, name))
                    elif fam.samples:
                        problems.append("line %d: TYPE for %s after its samples" % (line_no, name))
                    if typ not in TYPES:
                        problems.append("line %d: unknown type %r for %s" % (line_no, typ, name))
                    fam.type = typ
                if current is not None and current != name:
                    finished.add(current)
                    current = None
            continue  # any other comment is allowed
        try:
            sample = _parse_sample(line, line_no, problems)
        except ValueError as e:
            problems.append("line %d: %s: %r" % (line_no, e, line))
            continue
        fam_name = _family_of(sample.name, families)
        if fam_name != current:
            if current is not None:
                finished.add(current)
            if fam_name in finished:
                problems.append("line %d: samples of %s are not contiguous" % (line_no, fam_name))
            current = fam_name
        key = (sample.name, tuple(sorted(sample.labels.items())))
        if key in seen_series:
            problems.append("line %d: series %s%s appears twice" % (line_no, sample.name, dict(key[1])))
        seen_series.add(key)
        family(fam_name).samples.append(sample)
    return families, order


def _check_counter(fam, problems):
    if not fam.name.endswith("_total"):
        problems.append("counter %s: name should end in _total" % fam.name)
    for s in fam.samples:
        if math.isnan(s.value) or s.value < 0:
            problems.append("line %d: counter %s has value %r" % (s.line_no, s.name, s.value))


def _check_histogram(fam, problems):
    series = {}
    for s in fam.samples:
        suffix = s.name[len(fam.name):]
        if suffix not in ("_bucket", "_sum", "_count"):
            problems.append("line %d: histogram %s has a sample named %s" % (s.line_no, fam.name, s.name))
            continue
        labels = dict(s.labels)
        le = labels.pop("le", None)
        entry = series.setdefault(tuple(sorted(labels.items())), {"buckets": [], "sum": None, "count": None})
        if suffix == "_bucket":
            if le is None:
                problems.append("line %d: %s without le" % (s.line_no, s.name))
                continue
            try:
                bound = parse_float(le)
            except ValueError:
                problems.append("line %d: %s le=%r is not a float" % (s.line_no, s.name, le))
                continue
            entry["buckets"].append((bound, s.value, s.line_no))
        elif le is not None:
            problems.append("line %d: %s must not have an le label" % (s.line_no, s.name))
        else:
            entry[suffix[1:]] = s.value
    for labels, entry in series.items():
        where = "histogram %s%s" % (fam.name, dict(labels))
        buckets = entry["buckets"]
        if not buckets:
            problems.append("%s: no buckets" % where)
            continue
        bounds = [b for b, _, _ in buckets]
        if bounds != sorted(bounds):
            problems.append("%s: buckets not in increasing le order" % where)
        if len(set(bounds)) != len(bounds):
            problems.append("%s: repeated le" % where)
        if not math.isinf(max(bounds)):
            problems.append("%s: no le=\"+Inf\" bucket" % where)
        counts = [c for _, c in sorted((b, c) for b, c, _ in buckets)]
        if any(b < a for a, b in zip(counts, counts[1:])):
            problems.append("%s: bucket counts are not cumulative: %r" % (where, counts))
        if entry["sum"] is None:
            problems.append("%s: no _sum" % where)
        if entry["count"] is None:
            problems.append("%s: no _count" % where)
        elif math.isinf(max(bounds)) and entry["count"] != counts[-1]:
            problems.append("%s: _count %r differs from the +Inf bucket %r" % (where, entry["count"], counts[-1]))


def _check_summary(fam, problems):
    series = {}
    for s in fam.samples:
        suffix = s.name[len(fam.name):]
        labels = dict(s.labels)
        q = labels.pop("quantile", None)
        entry = series.setdefault(tuple(sorted(labels.items())), set())
        if suffix == "":
            if q is None:
                problems.append("line %d: summary %s sample without quantile" % (s.line_no, s.name))
                continue
            try:
                qv = parse_float(q)
                if not 0 <= qv <= 1:
                    raise ValueError()
            except ValueError:
                problems.append("line %d: quantile %r not in [0, 1]" % (s.line_no, q))
        elif suffix in ("_sum", "_count"):
            entry.add(suffix)
        else:
            problems.append("line %d: summary %s has a sample named %s" % (s.line_no, fam.name, s.name))
    for labels, have in series.items():
        for need in ("_sum", "_count"):
            if need not in have:
                problems.append("summary %s%s: no %s" % (fam.name, dict(labels), need))


def _run_promtool(text):
    try:
        proc = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return ["promtool could not run: %s" % e]
    if proc.returncode == 0:
        return []
    out = (proc.stdout + proc.stderr).decode(errors="replace").strip()
    return ["promtool check metrics (exit %d): %s" % (proc.returncode, out)]


def check(text, use_promtool=True):
    """Returns a list of problems (strings); empty when `text` is a valid exposition."""
    problems = []
    families, _ = _parse(text, problems)
    for fam in families.values():
        if fam.help is None:
            problems.append("%s: no HELP line (promtool lint: no help text)" % fam.name)
        if fam.type == "counter":
            _check_counter(fam, problems)
        elif fam.type == "histogram":
            _check_histogram(fam, problems)
        elif fam.type == "summary":
            _check_summary(fam, problems)
    if use_promtool and os.path.exists(PROMTOOL):
        problems.extend(_run_promtool(text))
    return problems


def parse(text):
    """{family name: Family} (raises ValueError when the text has problems)."""
    problems = []
    families, _ = _parse(text, problems)
    if problems:
        raise ValueError("; ".join(problems))
    return families


def samples(text):
    """Every sample, in order, as Sample objects (.name, .labels, .value)."""
    return [s for fam in parse(text).values() for s in fam.samples]


def value(text, name, **labels):
    """The value of the one sample called `name` whose labels include `labels`
    (None when there is none; ValueError when several match)."""
    found = [s for s in samples(text) if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    if len(found) > 1:
        raise ValueError("%d samples of %s match %r" % (len(found), name, labels))
    return found[0].value if found else None


if __name__ == "__main__":
    data = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
    result = check(data)
    for p in result:
        print(p)
    sys.exit(1 if result else 0)
