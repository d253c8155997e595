"""Deployment artefacts: shipped configs, Kubernetes manifests, compose file,
Dockerfile, and a local run of the three-hop deployment.

What is checked (issue "Deploying onelayer"):
- every YAML file under config/ passes `onelayer --check`, and so do the
  config embedded in the Kubernetes ConfigMap and the compose configs;
- the Kubernetes and compose files parse (with the YAML subset below) and
  agree with the configs they carry: probes hit admin.listen, container
  ports are listeners, the grace period covers preStop + drain_timeout;
- the Dockerfile: pinned base images, non-root USER, HEALTHCHECK on /healthz
  (and the check command itself works against a live server), no network
  fetch but apt, build steps that call the scripts .ci/run calls;
- deploy/local-three-hop.sh: origin arrivals per client request <= 3 with
  the protocol, and more than 3 without it (control run).

Python's standard library has no YAML parser, so `MiniYaml` reads the block
style subset the deploy files are written in and refuses everything else
(anchors, tags, flow mappings...), so a file that leaves the subset fails
loudly instead of being misread. onelayer configs are validated by the
binary itself (`--check`). Standard library only.
"""
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

SOURCE_DIR = os.environ.get("ONELAYER_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
ONELAYER_BIN = os.environ.get("ONELAYER_BIN", "")

K8S_DIR = os.path.join(SOURCE_DIR, "deploy", "kubernetes")
COMPOSE_DIR = os.path.join(SOURCE_DIR, "deploy", "compose")
COMPOSE_FILE = os.path.join(COMPOSE_DIR, "docker-compose.yaml")
DOCKERFILE = os.path.join(SOURCE_DIR, "Dockerfile")


def require_binary():
    """ctest always sets ONELAYER_BIN: without the binary the test fails, it is not skipped."""
    if not (ONELAYER_BIN and os.path.isfile(ONELAYER_BIN) and os.access(ONELAYER_BIN, os.X_OK)):
        raise AssertionError(f"ONELAYER_BIN={ONELAYER_BIN!r} is not an executable file (run through ctest)")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# --------------------------------------------------------------------------
# A YAML subset parser: block mappings and sequences, plain/quoted scalars,
# flow sequences of scalars, literal block scalars (| and |-), comments and
# `---` document separators.
# --------------------------------------------------------------------------

class YamlSubsetError(ValueError):
    pass


def _strip_comment(text):
    """Drops a trailing comment (a # at the start or after a blank), outside quotes."""
    quote, escaped = None, False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\" and quote == '"':
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'" and (i == 0 or text[i - 1] in " \t[,:"):
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[:i].rstrip()
    return text.rstrip()


def _split_flow(body, where):
    """Splits the inside of [...] or {...} on commas outside quotes; no nesting."""
    items, current, quote = [], "", None
    for ch in body:
        if quote:
            current += ch
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
            current += ch
        elif ch == ",":
            items.append(current.strip())
            current = ""
        elif ch in "[]{}":
            raise YamlSubsetError(f"{where}: nested flow collections are outside the subset")
        else:
            current += ch
    if current.strip():
        items.append(current.strip())
    return items


def _scalar(text, where):
    text = text.strip()
    if not text:
        return None
    first = text[0]
    if first in "&*!|>%@`":
        raise YamlSubsetError(f"{where}: {text!r} is outside the supported YAML subset")
    if first == "[":
        if not text.endswith("]"):
            raise YamlSubsetError(f"{where}: unterminated flow sequence")
        return [_scalar(item, where) for item in _split_flow(text[1:-1], where)]
    if first == "{":
        if not text.endswith("}"):
            raise YamlSubsetError(f"{where}: unterminated flow mapping")
        mapping = {}
        for item in _split_flow(text[1:-1], where):
            kv = _key_value(item, where)
            if kv is None or kv[0] in mapping:
                raise YamlSubsetError(f"{where}: bad flow mapping entry {item!r}")
            mapping[kv[0]] = _scalar(kv[1], where)
        return mapping
    if first == '"':
        if len(text) < 2 or not text.endswith('"'):
            raise YamlSubsetError(f"{where}: unterminated double-quoted string")
        return json.loads(text)
    if first == "'":
        if len(text) < 2 or not text.endswith("'"):
            raise YamlSubsetError(f"{where}: unterminated single-quoted string")
        return text[1:-1].replace("''", "'")
    if text in ("true", "True", "false", "False"):
        return text in ("true", "True")
    if text in ("null", "~", "Null"):
        return None
    if re.fullmatch(r"[-+]?[0-9]+", text):
        return int(text)
    if re.fullmatch(r"[-+]?[0-9]*\.[0-9]+", text):
        return float(text)
    return text


def _key_value(content, where):
    """Splits 'key: value' (or 'key:') into its parts; None if not a mapping entry."""
    if content[0] in "\"'[{":
        return None
    m = re.match(r"^([^:\s][^:]*?)\s*:(?:\s+(.*))?$", content)
    if not m:
        return None
    return m.group(1), (m.group(2) or "")


class MiniYaml:
    def __init__(self, text, name):
        self.name = name
        self.lines = text.split("\n")
        self.i = 0

    def where(self, i=None):
        return f"{self.name}:{(self.i if i is None else i) + 1}"

    # The next line with content at or after self.i: (index, indent, content), or None.
    def peek(self):
        i = self.i
        while i < len(self.lines):
            raw = self.lines[i]
            if "\t" in raw[: len(raw) - len(raw.lstrip())]:
                raise YamlSubsetError(f"{self.where(i)}: tab in indentation")
            content = _strip_comment(raw.strip())
            if raw.strip() == "---":
                return (i, 0, "---")
            if content:
                return (i, len(raw) - len(raw.lstrip(" ")), content)
            i += 1
        return None

    def documents(self):
        docs = []
        while True:
            nxt = self.peek()
            if nxt is None:
                break
            if nxt[2] == "---":
                self.i = nxt[0] + 1
                continue
            docs.append(self.node(nxt[1]))
            after = self.peek()
            if after is not None and after[2] != "---":
                raise YamlSubsetError(f"{self.where(after[0])}: unexpected indentation")
        return docs

    def node(self, indent):
        i, ind, content = self.peek()
        if ind != indent:
            raise YamlSubsetError(f"{self.where(i)}: expected indentation {indent}, got {ind}")
        if content == "-" or content.startswith("- "):
            return self.sequence(indent)
        return self.mapping(indent)

    def mapping(self, indent):
        result = {}
        while True:
            nxt = self.peek()
            if nxt is None or nxt[2] == "---" or nxt[1] < indent:
                return result
            i, ind, content = nxt
            if ind > indent:
                raise YamlSubsetError(f"{self.where(i)}: unexpected indentation")
            if content == "-" or content.startswith("- "):
                raise YamlSubsetError(f"{self.where(i)}: a sequence item where a key was expected")
            kv = _key_value(content, self.where(i))
            if kv is None:
                raise YamlSubsetError(f"{self.where(i)}: expected 'key: value', got {content!r}")
            key, rest = kv
            if key in result:
                raise YamlSubsetError(f"{self.where(i)}: duplicate key {key!r}")
            self.i = i + 1
            result[key] = self.value_after_key(rest, indent, i)

    def value_after_key(self, rest, indent, i):
        if rest in ("|", "|-"):
            return self.block_scalar(indent, keep_final_newline=(rest == "|"))
        if rest:
            return _scalar(rest, self.where(i))
        nxt = self.peek()
        if nxt is None or nxt[2] == "---" or nxt[1] < indent:
            return None
        if nxt[1] == indent:
            # "key:" followed by "- item" at the key's own indentation (the
            # style kubectl prints) is a sequence; anything else is a null.
            is_item = nxt[2] == "-" or nxt[2].startswith("- ")
            return self.sequence(indent) if is_item else None
        return self.node(nxt[1])

    def sequence(self, indent):
        items = []
        while True:
            nxt = self.peek()
            if nxt is None or nxt[2] == "---" or nxt[1] < indent:
                return items
            i, ind, content = nxt
            if ind > indent:
                raise YamlSubsetError(f"{self.where(i)}: unexpected indentation")
            if not (content == "-" or content.startswith("- ")):
                return items
            rest = content[1:].lstrip()
            if rest == "-" or rest.startswith("- "):
                raise YamlSubsetError(f"{self.where(i)}: nested compact sequences are outside the subset")
            if not rest:
                self.i = i + 1
                child = self.peek()
                if child is None or child[1] <= indent:
                    items.append(None)
                else:
                    items.append(self.node(child[1]))
            elif _key_value(rest, self.where(i)) is not None:
                # "- key: value": a mapping whose first key sits after the dash;
                # blank the dash out and read the mapping at that column.
                raw = self.lines[i]
                col = len(raw) - len(raw.lstrip(" ")) + (len(content) - len(rest))
                self.lines[i] = " " * col + raw.lstrip(" ")[len(content) - len(rest):]
                items.append(self.mapping(col))
            else:
                self.i = i + 1
                items.append(_scalar(rest, self.where(i)))

    def block_scalar(self, parent_indent, keep_final_newline):
        lines, block_indent = [], None
        while self.i < len(self.lines):
            raw = self.lines[self.i]
            if raw.strip() == "":
                lines.append("")
                self.i += 1
                continue
            ind = len(raw) - len(raw.lstrip(" "))
            if ind <= parent_indent:
                break
            if block_indent is None:
                block_indent = ind
            elif ind < block_indent:
                raise YamlSubsetError(f"{self.where()}: block scalar line less indented than its first line")
            lines.append(raw[block_indent:])
            self.i += 1
        while lines and lines[-1] == "":
            lines.pop()
        text = "\n".join(lines)
        return text + "\n" if keep_final_newline and text else text


def load_yaml_documents(path):
    return MiniYaml(read(path), os.path.relpath(path, SOURCE_DIR)).documents()


# --------------------------------------------------------------------------
# Helpers over onelayer configs.
# --------------------------------------------------------------------------

def run_check(config_path):
    return subprocess.run([ONELAYER_BIN, "--check", "--config", config_path],
                          capture_output=True, text=True, timeout=30)


EXAMPLE_FILES = "/etc/onelayer/"


def make_example_files(names, where):
    """Stand-ins in the existing directory `where` for files an example
    names under /etc/onelayer/, made with the openssl CLI: a CA for names
    ending in ca.pem, a certificate it signed for other .pem names, that
    certificate's key for .key names, a token for the rest. Readable by
    any user (an image's user among them)."""
    def openssl(*args):
        subprocess.run(["openssl"] + list(args), cwd=where, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=example ca")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=example.test")
    openssl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "leaf.pem", "-days", "2")
    files = os.path.join(where, "files")
    os.mkdir(files)
    os.chmod(files, 0o755)
    for name in names:
        source = ("ca.pem" if name.endswith("ca.pem") else "leaf.pem" if name.endswith(".pem")
                  else "leaf.key" if name.endswith(".key") else None)
        if source:
            shutil.copy(os.path.join(where, source), os.path.join(files, name))
        else:
            with open(os.path.join(files, name), "w") as f:
                f.write("example-token\n")
        os.chmod(os.path.join(files, name), 0o644)
    return files


def with_example_files(path, tmp):
    """`path`, or, when it names files under /etc/onelayer/ (certificates,
    keys, an admin token), a copy that names stand-ins made in `tmp`
    (make_example_files). --check loads every one of them."""
    text = read(path)
    names = sorted(set(re.findall(re.escape(EXAMPLE_FILES) + r"([\w.-]+)", text)))
    if not names:
        return path
    files = make_example_files(names, tmp)
    copy = os.path.join(tmp, os.path.basename(path))
    with open(copy, "w") as f:
        f.write(text.replace(EXAMPLE_FILES, files + "/"))
    return copy


def host_port(value):
    """'0.0.0.0:9901' / '[::]:9901' / 'svc:8080' -> (host, port)."""
    host, _, port = str(value).rpartition(":")
    return host.strip("[]"), int(port)


def drain_seconds(value):
    m = re.fullmatch(r"([0-9.]+)(ms|s|m)", str(value))
    if not m:
        raise ValueError(f"unexpected duration {value!r}")
    n = float(m.group(1))
    return {"ms": n / 1000, "s": n, "m": n * 60}[m.group(2)]


def onelayer_config(text, name):
    """The keys the deploy files must agree with, read with MiniYaml."""
    docs = MiniYaml(text, name).documents()
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise YamlSubsetError(f"{name}: expected one mapping")
    return docs[0]


def admin_listen(cfg):
    return host_port((cfg.get("admin") or {}).get("listen", "127.0.0.1:9901"))


def listener_ports(cfg):
    return {l["name"]: host_port(l["listen"]) for l in cfg.get("listeners", [])}


def is_loopback(host):
    return host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")


def yaml_files_under(directory):
    found = []
    for dirpath, _, files in os.walk(directory):
        found += [os.path.join(dirpath, f) for f in files if f.endswith((".yaml", ".yml"))]
    return sorted(found)


# --------------------------------------------------------------------------
# The parser itself: it is what every manifest test stands on.
# --------------------------------------------------------------------------

class MiniYamlReadsTheSubset(unittest.TestCase):
    def test_nested_mappings_sequences_and_scalars_parse_to_python_values(self):
        doc = MiniYaml(
            "a: 1\n"
            "b:\n"
            "  - name: x   # comment\n"
            "    ports: [80, \"443\", 'q''s']\n"
            "  - plain\n"
            "c:\n"
            "  d: \"#not a comment\"\n"
            "  e: true\n"
            "  f: http://x:1/y\n", "t").documents()
        self.assertEqual(doc, [{"a": 1,
                                "b": [{"name": "x", "ports": [80, "443", "q's"]}, "plain"],
                                "c": {"d": "#not a comment", "e": True, "f": "http://x:1/y"}}])

    def test_literal_block_scalar_keeps_lines_comments_and_relative_indentation(self):
        doc = MiniYaml("data:\n  f.yaml: |\n    a: 1\n    # kept\n\n    b:\n      c: 2\nnext: 3\n", "t").documents()
        self.assertEqual(doc[0]["data"]["f.yaml"], "a: 1\n# kept\n\nb:\n  c: 2\n")
        self.assertEqual(doc[0]["next"], 3)

    def test_flow_mappings_and_sequences_at_the_key_indentation_parse(self):
        doc = MiniYaml("a: { b: 1, c: \"x, y\" }\nd:\n- 1\n- e: 2\n  f: 3\ng: \"q\\\" # no\"\n", "t").documents()
        self.assertEqual(doc, [{"a": {"b": 1, "c": "x, y"}, "d": [1, {"e": 2, "f": 3}], "g": 'q" # no'}])

    def test_documents_split_on_separator(self):
        self.assertEqual(MiniYaml("a: 1\n---\nb: 2\n", "t").documents(), [{"a": 1}, {"b": 2}])

    def test_constructs_outside_the_subset_are_refused(self):
        for text in ("a: &x 1\n", "a: *x\n", "a: {b: {c: 1}}\n", "a: !!str 1\n", "a: 1\na: 2\n",
                     "a:\n  b: 1\n   c: 2\n", "a: >\n  folded\n", "a:\n  - - x\n", "a: \"open\n"):
            with self.subTest(text=text), self.assertRaises(YamlSubsetError):
                MiniYaml(text, "t").documents()

    def test_manifests_read_the_same_as_kubectl_kustomize(self):
        # kubectl is in `deploy/install-deps.sh test` (Debian's kubernetes-client
        # when no kubectl is installed); without it this test is reported as
        # skipped, and a skip fails the run under CI=true.
        kubectl = shutil.which("kubectl")
        if not kubectl:
            self.skipTest("kubectl not installed: cross-check with a full YAML parser not run")
        out = subprocess.run([kubectl, "kustomize", K8S_DIR], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            self.fail(f"kubectl kustomize failed: {out.stderr}")
        ours = []
        for f in sorted(os.listdir(K8S_DIR)):
            if f.endswith(".yaml") and f != "kustomization.yaml":
                ours += load_yaml_documents(os.path.join(K8S_DIR, f))
        theirs = MiniYaml(out.stdout, "kustomize-output").documents()
        key = lambda d: (d["kind"], d["metadata"]["name"])
        self.assertEqual(sorted(ours, key=key), sorted(theirs, key=key))


# --------------------------------------------------------------------------
# Shipped onelayer configs.
# --------------------------------------------------------------------------

class ShippedConfigsPassCheck(unittest.TestCase):
    def setUp(self):
        require_binary()

    def assert_check_passes(self, path, label=None):
        with tempfile.TemporaryDirectory() as tmp:
            result = run_check(with_example_files(path, tmp))
        self.assertEqual(result.returncode, 0,
                         f"{label or path} fails onelayer --check:\n{result.stdout}{result.stderr}")

    def test_check_rejects_a_config_with_an_unknown_key(self):
        # Guards the tests below: a --check that accepts everything proves nothing.
        with tempfile.TemporaryDirectory() as tmp:
            bad = os.path.join(tmp, "bad.yaml")
            with open(bad, "w") as f:
                f.write("listeners:\n  - name: x\n    listen: 127.0.0.1:15001\n    bogus_key: 1\n")
            result = run_check(bad)
        self.assertEqual(result.returncode, 1)
        self.assertRegex(result.stdout + result.stderr, r"bad\.yaml:\d+:\d+: listeners\[0\]\.bogus_key")

    def test_every_yaml_file_under_config_passes_check(self):
        files = yaml_files_under(os.path.join(SOURCE_DIR, "config"))
        names = {os.path.relpath(f, SOURCE_DIR) for f in files}
        for expected in ("config/onelayer.yaml", "config/examples/outbound-sidecar.yaml",
                         "config/examples/inbound-sidecar.yaml", "config/examples/edge-gateway.yaml",
                         "config/examples/post-with-idempotency-key.yaml",
                         "config/examples/budget-and-breaker.yaml"):
            self.assertIn(expected, names)
        for f in files:
            with self.subTest(config=os.path.relpath(f, SOURCE_DIR)):
                self.assert_check_passes(f)

    def test_config_embedded_in_the_configmap_passes_check(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name, text in KubernetesManifests.embedded_configs().items():
                with self.subTest(config=name):
                    path = os.path.join(tmp, name.replace("/", "_"))
                    with open(path, "w") as f:
                        f.write(text)
                    self.assert_check_passes(path, f"deploy/kubernetes ConfigMap {name}")

    def test_every_compose_config_passes_check(self):
        files = yaml_files_under(os.path.join(COMPOSE_DIR, "config"))
        self.assertEqual(len(files), 3)
        for f in files:
            with self.subTest(config=os.path.relpath(f, SOURCE_DIR)):
                self.assert_check_passes(f)


# --------------------------------------------------------------------------
# Kubernetes.
# --------------------------------------------------------------------------

class KubernetesManifests(unittest.TestCase):
    @staticmethod
    def documents():
        docs = []
        for f in sorted(os.listdir(K8S_DIR)):
            if f.endswith(".yaml") and f != "kustomization.yaml":
                docs += load_yaml_documents(os.path.join(K8S_DIR, f))
        return docs

    @classmethod
    def embedded_configs(cls):
        """{"<configmap>/<key>": text} for every .yaml key of every ConfigMap."""
        out = {}
        for d in cls.documents():
            if d.get("kind") == "ConfigMap":
                for key, text in (d.get("data") or {}).items():
                    if key.endswith(".yaml"):
                        out[f"{d['metadata']['name']}/{key}"] = text
        return out

    def setUp(self):
        self.docs = self.documents()
        self.by_kind = {}
        for d in self.docs:
            self.by_kind.setdefault(d["kind"], []).append(d)
        self.assertEqual(len(self.by_kind.get("Deployment", [])), 1)
        self.deployment = self.by_kind["Deployment"][0]
        self.pod = self.deployment["spec"]["template"]["spec"]
        sidecars = [c for c in self.pod.get("initContainers", []) if c["name"] == "onelayer"]
        self.assertEqual(len(sidecars), 1, "onelayer must be an initContainer (native sidecar)")
        self.sidecar = sidecars[0]
        self.cfg = self.sidecar_config()

    def sidecar_config(self):
        """The onelayer config the sidecar's --config argument points at, via its volume."""
        args = self.sidecar.get("args", [])
        self.assertIn("--config", args)
        config_path = args[args.index("--config") + 1]
        for mount in self.sidecar.get("volumeMounts", []):
            prefix = mount["mountPath"].rstrip("/") + "/"
            if config_path.startswith(prefix):
                volume = next(v for v in self.pod["volumes"] if v["name"] == mount["name"])
                cm_name = volume["configMap"]["name"]
                cm = next(d for d in self.by_kind["ConfigMap"] if d["metadata"]["name"] == cm_name)
                key = config_path[len(prefix):]
                self.assertIn(key, cm["data"], f"ConfigMap {cm_name} has no key {key}")
                return onelayer_config(cm["data"][key], f"ConfigMap {cm_name}/{key}")
        self.fail(f"no volume mount holds {config_path}")

    def port_number(self, port):
        if isinstance(port, int):
            return port
        named = {p["name"]: p["containerPort"] for p in self.sidecar.get("ports", []) if "name" in p}
        self.assertIn(port, named, f"named port {port} is not a port of the onelayer container")
        return named[port]

    def test_onelayer_is_a_native_sidecar_with_restart_policy_always(self):
        self.assertEqual(self.sidecar.get("restartPolicy"), "Always")

    def test_probes_hit_admin_listener_paths_and_port(self):
        host, admin_port = admin_listen(self.cfg)
        self.assertIn(host, ("0.0.0.0", "::"), "kubelet probes reach the pod IP: admin must not be loopback")
        expected = {"readinessProbe": "/ready", "livenessProbe": "/healthz", "startupProbe": "/ready"}
        for probe, path in expected.items():
            if probe == "startupProbe" and probe not in self.sidecar:
                continue
            with self.subTest(probe=probe):
                get = self.sidecar[probe]["httpGet"]
                self.assertEqual(get["path"], path)
                self.assertEqual(self.port_number(get["port"]), admin_port)

    def test_container_ports_are_listeners_or_admin_and_reachable_listeners_are_declared(self):
        _, admin_port = admin_listen(self.cfg)
        listeners = listener_ports(self.cfg)
        declared = {p["containerPort"] for p in self.sidecar.get("ports", [])}
        allowed = {port for _, port in listeners.values()} | {admin_port}
        self.assertLessEqual(declared, allowed, "a containerPort no listener binds")
        for name, (host, port) in listeners.items():
            if not is_loopback(host):
                self.assertIn(port, declared, f"listener {name} listens on {host}:{port} but is no containerPort")
        self.assertIn(admin_port, declared)

    def test_service_targets_a_listener_reachable_from_outside_the_pod(self):
        listeners = listener_ports(self.cfg)
        reachable = {port for host, port in listeners.values() if not is_loopback(host)}
        selector = self.deployment["spec"]["selector"]["matchLabels"]
        for svc in self.by_kind.get("Service", []):
            self.assertEqual(svc["spec"]["selector"], selector)
            for p in svc["spec"]["ports"]:
                with self.subTest(service=svc["metadata"]["name"], port=p.get("name")):
                    self.assertIn(self.port_number(p["targetPort"]), reachable)
        self.assertTrue(self.by_kind.get("Service"))

    def test_grace_period_exceeds_prestop_sleeps_plus_drain_timeout(self):
        grace = self.pod.get("terminationGracePeriodSeconds", 30)
        drain = drain_seconds(self.cfg.get("drain_timeout", "10s"))
        sleeps = 0
        for c in self.pod.get("initContainers", []) + self.pod["containers"]:
            pre = (c.get("lifecycle") or {}).get("preStop") or {}
            if "sleep" in pre:
                sleeps += pre["sleep"]["seconds"]
            elif "exec" in pre:
                cmd = pre["exec"]["command"]
                if cmd[0] == "sleep":
                    sleeps += float(cmd[1])
        self.assertIn("preStop", self.sidecar.get("lifecycle", {}))
        self.assertGreater(grace, sleeps + drain,
                           f"terminationGracePeriodSeconds {grace} <= preStop {sleeps}s + drain_timeout {drain}s")

    def test_every_container_is_locked_down_and_has_resources(self):
        self.assertTrue(self.pod["securityContext"].get("runAsNonRoot"))
        for c in self.pod.get("initContainers", []) + self.pod["containers"]:
            with self.subTest(container=c["name"]):
                sc = c["securityContext"]
                self.assertIs(sc.get("readOnlyRootFilesystem"), True)
                self.assertIs(sc.get("allowPrivilegeEscalation"), False)
                self.assertIs(sc.get("runAsNonRoot", self.pod["securityContext"].get("runAsNonRoot")), True)
                for kind in ("requests", "limits"):
                    self.assertIn("cpu", c["resources"][kind])
                    self.assertIn("memory", c["resources"][kind])

    def test_images_are_pinned_by_tag(self):
        for c in self.pod.get("initContainers", []) + self.pod["containers"]:
            with self.subTest(container=c["name"]):
                self.assertRegex(c["image"], r"^[^:@]+(:[^:]+|@sha256:[0-9a-f]{64})$")
                self.assertFalse(c["image"].endswith(":latest"))

    def test_config_volume_is_a_directory_mount_so_updates_reach_the_pod(self):
        # A subPath mount never sees ConfigMap updates, so SIGHUP would reload a stale file.
        for mount in self.sidecar["volumeMounts"]:
            self.assertNotIn("subPath", mount)


# --------------------------------------------------------------------------
# Compose.
# --------------------------------------------------------------------------

class ComposeThreeHop(unittest.TestCase):
    def setUp(self):
        docs = load_yaml_documents(COMPOSE_FILE)
        self.assertEqual(len(docs), 1)
        self.services = docs[0]["services"]
        self.onelayers = {}
        for name, svc in self.services.items():
            cfg_file = self.mounted_config(svc)
            if cfg_file:
                self.onelayers[name] = onelayer_config(read(cfg_file), os.path.relpath(cfg_file, SOURCE_DIR))

    @staticmethod
    def mounted_config(svc):
        for volume in svc.get("volumes", []):
            src, dst = volume.split(":")[:2]
            if dst == "/etc/onelayer/onelayer.yaml":
                return os.path.normpath(os.path.join(COMPOSE_DIR, src))
        return None

    def service_port(self, name):
        """The port a service listens on: an app's LISTEN, or a onelayer listener."""
        svc = self.services[name]
        if name in self.onelayers:
            return {port for _, port in listener_ports(self.onelayers[name]).values()}
        return {host_port(svc["environment"]["LISTEN"])[1]}

    def test_topology_is_three_onelayers_two_apps_and_an_origin(self):
        self.assertEqual(sorted(self.onelayers), ["onelayer-a", "onelayer-b", "onelayer-c"])
        self.assertEqual(sorted(set(self.services) - set(self.onelayers)), ["app1", "app2", "origin"])

    def test_each_hop_points_at_the_next_one_on_a_port_it_listens_on(self):
        chain = [("onelayer-a", "app1"), ("app1", "onelayer-b"), ("onelayer-b", "app2"),
                 ("app2", "onelayer-c"), ("onelayer-c", "origin")]
        for src, dst in chain:
            with self.subTest(hop=f"{src} -> {dst}"):
                if src in self.onelayers:
                    targets = [host_port(e) for u in self.onelayers[src]["upstreams"] for e in u["endpoints"]]
                else:
                    m = re.fullmatch(r"http://([^:/]+):(\d+)/?", self.services[src]["environment"]["NEXT_HOP"])
                    self.assertIsNotNone(m)
                    targets = [(m.group(1), int(m.group(2)))]
                for host, port in targets:
                    self.assertEqual(host, dst)
                    self.assertIn(port, self.service_port(dst))

    def test_onelayer_listeners_and_admin_listen_beyond_loopback_and_ports_match(self):
        for name, cfg in self.onelayers.items():
            with self.subTest(service=name):
                admin = admin_listen(cfg)
                listeners = listener_ports(cfg)
                for host, _ in list(listeners.values()) + [admin]:
                    self.assertFalse(is_loopback(host), "other containers cannot reach a loopback listener")
                bound = {port for _, port in listeners.values()} | {admin[1]}
                svc = self.services[name]
                for p in svc.get("expose", []):
                    self.assertIn(int(p), bound)
                for p in svc.get("ports", []):
                    self.assertIn(int(str(p).split(":")[-1]), bound)
                self.assertEqual(admin[1], 9901, "the image HEALTHCHECK probes admin port 9901")

    def test_every_layer_retries_three_times_and_owns_by_protocol(self):
        for name, cfg in self.onelayers.items():
            with self.subTest(service=name):
                self.assertIs(cfg.get("propagate_baggage", True), True)
                for listener in cfg["listeners"]:
                    for route in listener["routes"]:
                        self.assertEqual(route["retry"]["max_attempts"], 3)
                        self.assertEqual(route.get("inner_hops", "forbid"), "forbid")

    def test_apps_and_origin_scripts_exist_and_are_mounted(self):
        for name in ("app1", "app2", "origin"):
            svc = self.services[name]
            src = svc["volumes"][0].split(":")[0]
            self.assertTrue(os.path.isfile(os.path.join(COMPOSE_DIR, src)))
            self.assertIn(svc["volumes"][0].split(":")[1], svc["command"])
            # Every mounted file exists, and the module the scripts import
            # sits next to them in the container.
            mounts = {v.split(":")[1]: v.split(":")[0] for v in svc["volumes"]}
            for dst, src in mounts.items():
                self.assertTrue(os.path.isfile(os.path.join(COMPOSE_DIR, src)), src)
            self.assertEqual(mounts.get("/srv/demo_server.py"), "./demo_server.py")

    def test_images_are_pinned_by_tag(self):
        for name, svc in self.services.items():
            with self.subTest(service=name):
                self.assertRegex(svc["image"], r"^[^:]+:[^:]+$")
                self.assertFalse(svc["image"].endswith(":latest"))


# --------------------------------------------------------------------------
# Dockerfile.
# --------------------------------------------------------------------------

def dockerfile_instructions(text):
    """[(INSTRUCTION, arguments)] with line continuations joined, comments dropped."""
    out, pending = [], ""
    for line in text.split("\n"):
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


class DockerfileLint(unittest.TestCase):
    def setUp(self):
        self.instructions = dockerfile_instructions(read(DOCKERFILE))
        self.args = {}
        self.stages = []  # [(image, alias, [(instr, args)])]
        for instr, rest in self.instructions:
            if instr == "ARG" and not self.stages:
                name, _, default = rest.partition("=")
                self.args[name] = default
            elif instr == "FROM":
                words = rest.split()
                alias = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
                self.stages.append((self.expand(words[0]), alias, []))
            elif self.stages:
                self.stages[-1][2].append((instr, rest))
        self.final = self.stages[-1][2]

    def expand(self, text):
        return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: self.args.get(m.group(1) or m.group(2), ""), text)

    def final_values(self, instr):
        return [rest for i, rest in self.final if i == instr]

    def test_multi_stage_from_debian_12_images_pinned_by_tag(self):
        self.assertGreaterEqual(len(self.stages), 2)
        aliases = set()
        for image, alias, _ in self.stages:
            with self.subTest(image=image):
                self.assertNotIn(image, aliases)
                self.assertRegex(image, r"^debian:12\.\d+(-slim)?$", "pin a Debian 12 point release")
            if alias:
                aliases.add(alias)
        self.assertTrue(self.stages[-1][0].endswith("-slim"), "the runtime stage is slim")

    def test_build_stage_runs_the_scripts_ci_runs(self):
        # .ci/run -> deploy/test.sh -> deploy/install-deps.sh + deploy/build.sh
        self.assertIn("deploy/test.sh", read(os.path.join(SOURCE_DIR, ".ci", "run")))
        test_sh = read(os.path.join(SOURCE_DIR, "deploy", "test.sh"))
        self.assertIn("deploy/install-deps.sh", test_sh)
        self.assertIn("deploy/build.sh", test_sh)
        build_runs = " ; ".join(rest for i, rest in self.stages[0][2] if i == "RUN")
        self.assertRegex(build_runs, r"deploy/install-deps\.sh build\b")
        self.assertRegex(build_runs, r"deploy/build\.sh -DONELAYER_TESTS=OFF\b")

    def test_runtime_stage_runs_as_a_numeric_non_root_user(self):
        users = self.final_values("USER")
        self.assertTrue(users, "no USER in the runtime stage")
        uid = users[-1].split(":")[0]
        self.assertRegex(uid, r"^\d+$", "numeric uid, so Kubernetes runAsNonRoot can verify it")
        self.assertNotEqual(int(uid), 0)

    def test_healthcheck_probes_healthz_on_the_exposed_admin_port(self):
        checks = self.final_values("HEALTHCHECK")
        self.assertEqual(len(checks), 1)
        self.assertIn("/healthz", checks[0])
        env = " ".join(self.final_values("ENV"))
        self.assertIn("ONELAYER_ADMIN_PORT=9901", env)
        exposed = " ".join(self.final_values("EXPOSE")).split()
        self.assertIn("9901", exposed)
        self.assertIn("15001", exposed)

    def healthcheck_command(self):
        spec = self.final_values("HEALTHCHECK")[0]
        cmd = json.loads(spec[spec.index("CMD") + 3:].strip())
        self.assertEqual(cmd[:2], ["bash", "-c"])
        return cmd[2]

    def test_healthcheck_command_passes_on_200_and_fails_on_503_or_no_listener(self):
        command = self.healthcheck_command()
        for status, expected_exit in ((200, 0), (503, 1), (None, 1)):
            with self.subTest(status=status):
                with AdminStub(status) as port:
                    env = dict(os.environ, ONELAYER_ADMIN_PORT=str(port))
                    result = subprocess.run(["bash", "-c", command], env=env, capture_output=True, timeout=10)
                self.assertEqual(result.returncode, expected_exit, result.stderr)

    def test_healthcheck_command_passes_against_a_running_onelayer(self):
        require_binary()
        with tempfile.TemporaryDirectory() as tmp:
            cfg = os.path.join(tmp, "hc.yaml")
            with open(cfg, "w") as f:
                f.write("admin:\n  listen: 127.0.0.1:0\nlisteners:\n  - name: in\n    listen: 127.0.0.1:0\n"
                        "    routes:\n      - name: all\n        upstream: u\n"
                        "upstreams:\n  - name: u\n    endpoints: [127.0.0.1:9]\n")
            ports_file = os.path.join(tmp, "ports")
            proc = subprocess.Popen([ONELAYER_BIN, "--config", cfg, "--ports-file", ports_file, "--log-level", "error"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                admin = wait_for_port(ports_file, "admin", proc)
                env = dict(os.environ, ONELAYER_ADMIN_PORT=str(admin))
                result = subprocess.run(["bash", "-c", self.healthcheck_command()], env=env,
                                        capture_output=True, timeout=10)
                self.assertEqual(result.returncode, 0, result.stderr)
            finally:
                proc.terminate()
                proc.wait(timeout=30)

    def test_no_network_fetch_other_than_apt(self):
        for stage_image, _, body in self.stages:
            for instr, rest in body:
                with self.subTest(stage=stage_image, instruction=f"{instr} {rest[:60]}"):
                    if instr == "ADD":
                        self.assertNotRegex(rest, r"https?://|git@")
                    if instr == "RUN":
                        self.assertNotRegex(rest, r"\b(curl|wget|git clone|pip3? install|npm|go get)\b")

    def test_stop_signal_entrypoint_and_overridable_config(self):
        self.assertEqual(self.final_values("STOPSIGNAL"), ["SIGTERM"])
        self.assertEqual(json.loads(self.final_values("ENTRYPOINT")[-1]), ["onelayer"])
        cmd = json.loads(self.final_values("CMD")[-1])
        self.assertEqual(cmd[:2], ["--config", "/etc/onelayer/onelayer.yaml"])
        copies = " ; ".join(self.final_values("COPY"))
        self.assertRegex(copies, r"config/ /etc/onelayer/")

    def test_runtime_libraries_cover_every_library_the_binary_needs(self):
        require_binary()
        installed = " ".join(rest for i, rest in self.final if i == "RUN")
        base = {"libc6", "libgcc-s1", "libstdc++6"}  # in debian:12-slim already
        ldd = subprocess.run(["ldd", ONELAYER_BIN], capture_output=True, text=True, timeout=30).stdout
        for path in re.findall(r"=> (/\S+)", ldd):
            if re.search(r"lib(asan|ubsan|tsan|lsan)", path):
                continue  # sanitizer builds; the image is built without
            package = owning_package(path)
            with self.subTest(library=path, package=package):
                self.assertIsNotNone(package, f"no Debian package owns {path}")
                self.assertTrue(package in base or re.search(rf"\b{re.escape(package)}\b", installed),
                                f"{package} (for {path}) is not installed in the runtime stage")

    def test_dockerignore_keeps_build_trees_and_git_out_of_the_context(self):
        lines = [l.strip() for l in read(os.path.join(SOURCE_DIR, ".dockerignore")).split("\n")]
        for pattern in (".git", "build", "build-*"):
            self.assertIn(pattern, lines)
        for needed in ("config", "deploy", "proxy", "CMakeLists.txt"):
            self.assertNotIn(needed, lines)


def wait_for_port(ports_file, name, proc, timeout_s=10.0):
    """The port onelayer reports for `name` in its --ports-file."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"onelayer exited with {proc.returncode} before binding")
        try:
            with open(ports_file) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == name:
                        return int(parts[1])
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"no '{name}' port in {ports_file} after {timeout_s}s")


def owning_package(path):
    candidates = {path, os.path.realpath(path)}
    for p in list(candidates):
        if p.startswith("/lib"):
            candidates.add("/usr" + p)
        if p.startswith("/usr/lib"):
            candidates.add(p[4:])
    for p in candidates:
        out = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if out.returncode == 0:
            return out.stdout.split(":")[0].strip()
    return None


class AdminStub:
    """A 127.0.0.1 server answering GET /healthz with a fixed status; None = a closed port."""

    def __init__(self, status):
        self.status = status

    def __enter__(self):
        if self.status is None:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()  # nothing listens there now
            self.server = None
            return port
        status = self.status

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                self.send_response(status if self.path == "/healthz" else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.server.server_address[1]

    def __exit__(self, *exc):
        if self.server:
            self.server.shutdown()
            self.server.server_close()


# --------------------------------------------------------------------------
# The test command: deploy/test.sh.
# --------------------------------------------------------------------------

RECORDER = """#!/usr/bin/env bash
echo "$(basename "$0") $PWD $*" >> "$RECORD"
while [ $# -gt 0 ]; do [ "$1" = -B ] && mkdir -p "$2"; shift; done
exit 0
"""


class TestCommandRunsEveryTest(unittest.TestCase):
    """deploy/test.sh and deploy/build.sh, run for real in a scratch copy
    where cmake, ctest, the package installer and the fuzzers only record
    how they were called."""

    def run_test_sh(self, quick):
        tmp = tempfile.mkdtemp(prefix="onelayer-test-sh-")
        self.addCleanup(shutil.rmtree, tmp, True)
        repo, tools, record = os.path.join(tmp, "repo"), os.path.join(tmp, "bin"), os.path.join(tmp, "record")
        for rel in ("deploy/test.sh", "deploy/build.sh"):
            os.makedirs(os.path.dirname(os.path.join(repo, rel)), exist_ok=True)
            shutil.copy(os.path.join(SOURCE_DIR, rel), os.path.join(repo, rel))
        os.makedirs(os.path.join(repo, "tests", "fuzz"))
        os.makedirs(tools)
        for path in (os.path.join(repo, "deploy", "install-deps.sh"), os.path.join(repo, "tests", "fuzz", "run-fuzzers.sh"),
                     os.path.join(tools, "cmake"), os.path.join(tools, "ctest")):
            with open(path, "w") as f:
                f.write(RECORDER)
            os.chmod(path, 0o755)
        env = {k: v for k, v in os.environ.items() if k not in ("BUILD_DIR", "BUILD_TYPE", "ONELAYER_QUICK")}
        env.update(PATH=tools + os.pathsep + env["PATH"], RECORD=record)
        if quick:
            env["ONELAYER_QUICK"] = "1"
        result = subprocess.run(["bash", os.path.join(repo, "deploy", "test.sh")], env=env,
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        with open(record) as f:
            calls = [line.split() for line in f]
        return repo, calls

    def test_every_build_turns_the_tests_on_and_every_ctest_fails_on_no_tests(self):
        for quick, dirs in ((False, ["build-asan", "build"]), (True, ["build"])):
            with self.subTest(quick=quick):
                repo, calls = self.run_test_sh(quick)
                configures = [c for c in calls if c[0] == "cmake" and "-S" in c]
                self.assertEqual([os.path.relpath(c[c.index("-B") + 1], repo) for c in configures], dirs)
                for c in configures:
                    self.assertIn("-DONELAYER_TESTS=ON", c)
                self.assertIn("-DONELAYER_SANITIZE=OFF", configures[-1])
                ctests = [c for c in calls if c[0] == "ctest"]
                self.assertEqual([os.path.relpath(c[1], repo) for c in ctests], dirs)
                for c in ctests:
                    self.assertIn("--no-tests=error", c)
                self.assertEqual(sum(c[0] == "run-fuzzers.sh" for c in calls), 0 if quick else 1)

    def test_ctest_with_no_tests_error_fails_where_no_test_is_registered(self):
        # What the flag above buys: a build configured without tests (as
        # deploy/run-demo.sh configures build/) fails instead of passing.
        with tempfile.TemporaryDirectory() as tmp:
            self.assertEqual(subprocess.run(["ctest"], cwd=tmp, capture_output=True, timeout=60).returncode, 0)
            result = subprocess.run(["ctest", "--no-tests=error"], cwd=tmp, capture_output=True, text=True, timeout=60)
            self.assertNotEqual(result.returncode, 0)
            self.assertIn("No tests were found", result.stdout + result.stderr)


# --------------------------------------------------------------------------
# The three-hop deployment, without containers.
# --------------------------------------------------------------------------

class LocalThreeHop(unittest.TestCase):
    script = os.path.join(SOURCE_DIR, "deploy", "local-three-hop.sh")

    def setUp(self):
        require_binary()
        # The script's work directory goes here, so its processes can be found by path.
        self.tmp = tempfile.mkdtemp(prefix="test-deploy-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def run_script(self, *args):
        env = dict(os.environ, ONELAYER_BIN=ONELAYER_BIN, TMPDIR=self.tmp)
        result = subprocess.run(["bash", self.script, *args], env=env, capture_output=True, text=True,
                                timeout=300)
        sys.stderr.write(f"\n$ deploy/local-three-hop.sh {' '.join(args)}\n{result.stdout}")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        summary = re.search(r"^summary (.*)$", result.stdout, re.M)
        self.assertIsNotNone(summary, result.stdout)
        return {k: float(v) for k, v in (kv.split("=") for kv in summary.group(1).split())}

    def test_protocol_keeps_origin_arrivals_at_three_per_request(self):
        s = self.run_script("-n", "10")
        self.assertEqual(s["answered"], 10)
        self.assertLessEqual(s["max_per_request"], 3)
        # The origin always fails, so the owning layer uses all its attempts.
        self.assertEqual(s["origin_arrivals"], 30)

    def test_control_without_the_protocol_multiplies_to_27(self):
        s = self.run_script("-n", "3", "--control")
        self.assertEqual(s["answered"], 3)
        self.assertEqual(s["max_per_request"], 27)

    def test_flaky_origin_recovers_within_one_layer_of_retries(self):
        # The origin fails twice, then answers 200: the owning layer's third
        # attempt gets through, every time.
        s = self.run_script("-n", "4", "--origin", "flaky")
        self.assertEqual(s["ok"], 4)
        self.assertEqual(s["max_per_request"], 3)

    def test_script_stops_every_process_it_started_and_removes_its_files(self):
        self.run_script("-n", "1")
        self.assertEqual(processes_mentioning(self.tmp), set())
        self.assertEqual(os.listdir(self.tmp), [])


def processes_mentioning(text):
    """Pids whose command line or environment contains `text` (from /proc)."""
    found = set()
    needle = text.encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        for name in ("cmdline", "environ"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as f:
                    if needle in f.read():
                        found.add(int(pid))
            except OSError:
                pass
    return found


if __name__ == "__main__":
    unittest.main()
