"""The container image, built from the Dockerfile the way a user builds it,
then run.

1. `deploy/base-image.sh` makes the Debian base images the Dockerfile names
   (debootstrap from apt's mirror, imported into podman; cached, so only the
   first run pays for it).
2. `podman build --format docker --isolation chroot --network host
   --pull=never` builds the repository's Dockerfile, whose build stage runs
   deploy/install-deps.sh and deploy/build.sh like CI.
3. Checks of the built image: its configuration (entrypoint, user, ports,
   health check as written in the Dockerfile), its size, what it does not
   hold (compilers, sources), `onelayer --version`, `onelayer --check` on
   every shipped config, and a request served by the image's binary in
   front of the demo upstream, its health check, and a clean SIGTERM exit.

Commands of the image run with `podman run` where podman can start a
container; where it cannot (crun cannot set rlimits without
CAP_SYS_RESOURCE, as on the CI machine), with chroot into the image's root
file system mounted read-only by `podman image mount`, as the image's user,
in its working directory, with its environment, and with bind mounts in a
private mount namespace for what `podman run -v` would mount.

The test is skipped (loudly, and a failure under CI=true) only where podman
cannot build at all. Every step shares one time budget,
CONTAINER_TEST_SECONDS (set by tests/container/CMakeLists.txt).
"""

import hashlib
import http.client
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

SOURCE_DIR = os.environ.get("ONELAYER_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "integration"))
import test_deploy  # noqa: E402  (the Dockerfile reader)

BUDGET = float(os.environ.get("CONTAINER_TEST_SECONDS", "1500"))
START = time.monotonic()
# One tag per checkout, so that checkouts side by side do not build over
# each other; it is kept, and with it podman's layer cache.
TAG = "localhost/onelayer-ctest:" + hashlib.sha256(SOURCE_DIR.encode()).hexdigest()[:12]
BUILD_FLAGS = ["--format", "docker", "--isolation", "chroot", "--network", "host", "--pull=never"]
IMAGE_USER = "10001:10001"
TEST_DIR = "/tmp"  # where the tests' files are mounted in the image (a directory every Debian image has)
# The runtime stage adds the stripped binary, its shared libraries (hiredis
# among them), config/, and iptables with its libraries for the transparent
# mode's init container: about 18 MB. A compiler or an unstripped binary is
# far more than this.
MAX_GROWTH = 24 * 1024 * 1024
MAX_SIZE = 200 * 1000 * 1000


def log(msg):
    sys.stderr.write("[container] %s\n" % msg)
    sys.stderr.flush()


def remaining():
    left = BUDGET - (time.monotonic() - START)
    if left < 5:
        raise AssertionError("the container test used up its %.0f s budget" % BUDGET)
    return left


def run(cmd, timeout=None, **kwargs):
    """subprocess.run bounded by the time budget; text output captured."""
    limit = remaining() if timeout is None else min(timeout, remaining())
    return subprocess.run(cmd, capture_output=True, text=True, timeout=limit,
                          stdin=subprocess.DEVNULL, **kwargs)


def cannot_build():
    """Why podman cannot build images here at all, or None."""
    if os.geteuid() != 0:
        return "not running as root (debootstrap and chroot need root; the README's commands run as root)"
    if not shutil.which("podman"):
        return "podman is not installed (deploy/install-deps.sh test installs it)"
    p = run(["podman", "info"], timeout=120)
    if p.returncode != 0:
        return "`podman info` fails: %s" % p.stderr.strip()[-500:]
    return None


def inspect(image):
    p = run(["podman", "image", "inspect", image], timeout=60)
    if p.returncode != 0:
        raise AssertionError("podman image inspect %s: %s" % (image, p.stderr))
    return json.loads(p.stdout)[0]


def project_version():
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
        return re.search(r"project\(onelayer VERSION (\S+)", f.read()).group(1)


def shipped_configs():
    """config/**/*.yaml, relative to config/ (the image copies config/ to /etc/onelayer/)."""
    base = os.path.join(SOURCE_DIR, "config")
    out = set()
    for d, _, files in os.walk(base):
        out |= {os.path.relpath(os.path.join(d, f), base) for f in files if f.endswith(".yaml")}
    return out


class ChrootRunner:
    """Runs the image's commands with chroot into its mounted root file
    system, the way `podman run` would start them: the image's user, working
    directory and environment; binds are (host path, image path, writable)."""

    kind = "chroot into the mounted image"

    def __init__(self, root, config):
        self.root = root
        self.config = config

    def command(self, args, binds=(), env=None, entrypoint=None):
        argv = list(entrypoint or self.config.get("Entrypoint") or []) + list(args)
        environment = dict(kv.split("=", 1) for kv in self.config.get("Env") or [])
        environment.update(env or {})
        steps = ["set -e"]
        for host, inside, writable in binds:
            target = shlex.quote(self.root + inside)
            steps.append("mount --bind %s %s" % (shlex.quote(host), target))
            if not writable:
                steps.append("mount -o remount,bind,ro %s" % target)
        user = self.config.get("User") or "0:0"
        workdir = self.config.get("WorkingDir") or "/"
        chroot = ["env", "-i"] + ["%s=%s" % kv for kv in environment.items()] + [
            "/usr/sbin/chroot", "--userspec=" + user, self.root,
            "/bin/sh", "-c", 'cd "$0" && exec "$@"', workdir] + argv
        steps.append("exec " + " ".join(shlex.quote(a) for a in chroot))
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(steps)]


class PodmanRunner:
    """Runs the image's commands with `podman run` (where crun can start one)."""

    kind = "podman run"

    def command(self, args, binds=(), env=None, entrypoint=None):
        cmd = ["podman", "run", "--rm", "--network", "host"]
        for host, inside, writable in binds:
            cmd += ["-v", "%s:%s%s" % (host, inside, "" if writable else ":ro")]
        for k, v in (env or {}).items():
            cmd += ["-e", "%s=%s" % (k, v)]
        if entrypoint:
            cmd += ["--entrypoint", json.dumps(list(entrypoint))]
        return cmd + [TAG] + list(args)


def wait_for_ports(path, names, proc, timeout=15.0):
    """{name: port} from a --ports-file once every name is in it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError("exited with %s before writing %s" % (proc.returncode, path))
        try:
            with open(path) as f:
                ports = dict((n, int(p)) for n, p in (line.split() for line in f if line.strip()))
            if all(n in ports for n in names):
                return ports
        except (FileNotFoundError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError("no %s in %s after %.0f s" % (names, path, timeout))


def get(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read().decode()
    finally:
        conn.close()


def stop(proc, timeout=20.0):
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout)


class ImageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        reason = cannot_build()
        if reason:
            log("!" * 72)
            log("SKIPPED: podman cannot build images on this machine: " + reason)
            log("The image is NOT proven by this run.")
            log("!" * 72)
            raise unittest.SkipTest("podman cannot build here: " + reason)

        t0 = time.monotonic()
        p = run(["bash", os.path.join(SOURCE_DIR, "deploy", "base-image.sh")])
        cls.base_seconds = time.monotonic() - t0
        if p.returncode != 0:
            raise AssertionError("deploy/base-image.sh failed:\n" + p.stdout + p.stderr)
        log(p.stdout.strip().splitlines()[-1] + " (%.0f s)" % cls.base_seconds)

        # As a user builds it: the repository as the context, its Dockerfile.
        t0 = time.monotonic()
        p = run(["podman", "build"] + BUILD_FLAGS + ["-t", TAG, SOURCE_DIR])
        cls.build_seconds = time.monotonic() - t0
        if p.returncode != 0:
            raise AssertionError("podman build failed:\n" + (p.stdout + p.stderr)[-6000:])
        log("podman build %s: %.0f s (%d steps from cache)" % (
            TAG, cls.build_seconds, p.stdout.count("Using cache")))

        cls.image = inspect(TAG)
        cls.config = cls.image["Config"]
        cls.dockerfile = test_deploy.dockerfile_instructions(test_deploy.read(test_deploy.DOCKERFILE))
        version = next(r.split("=", 1)[1] for i, r in cls.dockerfile
                       if i == "ARG" and r.startswith("DEBIAN_VERSION="))
        cls.base = inspect("docker.io/library/debian:%s-slim" % version)

        p = run(["podman", "image", "mount", TAG], timeout=120)
        if p.returncode != 0:
            raise AssertionError("podman image mount: " + p.stderr)
        cls.root = p.stdout.strip()
        # Not run(): the unmount must happen even when the budget is spent.
        cls.addClassCleanup(subprocess.run, ["podman", "image", "unmount", TAG],
                            capture_output=True, timeout=60)

        try:
            probe = run(PodmanRunner().command(["--version"]), timeout=120)
            why = (probe.stderr.strip().splitlines() or ["exit %d" % probe.returncode])[-1]
        except subprocess.TimeoutExpired:
            probe, why = None, "podman run did not finish within 120 s"
        if probe is not None and probe.returncode == 0:
            cls.runner = PodmanRunner()
        else:
            cls.runner = ChrootRunner(cls.root, cls.config)
            log("podman run cannot start a container here (%s); running the image's binary with %s" % (
                why, cls.runner.kind))
        cls.tmp = tempfile.mkdtemp(prefix="onelayer-ctest-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        uid, gid = (int(x) for x in IMAGE_USER.split(":"))
        os.chown(cls.tmp, uid, gid)  # the image's user writes its ports file here

    def in_image(self, args, timeout=60, **kwargs):
        return run(self.runner.command(args, **kwargs), timeout=timeout)

    def test_image_config_is_what_the_dockerfile_says(self):
        c = self.config
        self.assertEqual(c.get("Entrypoint"), ["onelayer"])
        self.assertEqual(c.get("Cmd"), ["--config", "/etc/onelayer/onelayer.yaml"])
        self.assertEqual(c.get("User"), IMAGE_USER)
        self.assertEqual(c.get("WorkingDir"), "/opt/onelayer")
        self.assertEqual(sorted(c.get("ExposedPorts", {})), ["15001/tcp", "9901/tcp"])
        self.assertEqual(c.get("StopSignal"), "SIGTERM")
        self.assertIn("ONELAYER_ADMIN_PORT=9901", c.get("Env", []))
        # Only the docker format keeps HEALTHCHECK (hence --format docker).
        spec = next(r for i, r in self.dockerfile if i == "HEALTHCHECK")
        written = json.loads(spec[spec.index("CMD") + 3:].strip())
        self.assertEqual(self.image.get("Healthcheck", {}).get("Test"), ["CMD"] + written)

    def test_image_size_is_its_base_plus_a_few_megabytes(self):
        size, base = self.image["Size"], self.base["Size"]
        log("image %.1f MB = base %.1f MB + %.1f MB" % (size / 1e6, base / 1e6, (size - base) / 1e6))
        self.assertLess(size - base, MAX_GROWTH)
        self.assertLess(size, MAX_SIZE)

    def test_image_holds_no_build_tools_or_sources(self):
        for path in ("usr/bin/cmake", "usr/bin/g++", "usr/bin/cc", "usr/bin/clang", "src",
                     "usr/include/uv.h", "var/lib/apt/lists/lock"):
            with self.subTest(path=path):
                self.assertFalse(os.path.lexists(os.path.join(self.root, path)))
        self.assertTrue(os.path.isfile(os.path.join(self.root, "usr/local/bin/onelayer")))

    def test_version_runs_in_the_image(self):
        p = self.in_image(["--version"])
        self.assertEqual(p.returncode, 0, p.stderr)
        # The image's binary is the default build: glibc's malloc, nghttp2
        # linked in (the image has no libnghttp2).
        lines = p.stdout.strip().splitlines()
        self.assertEqual(lines[0], "onelayer %s (allocator: libc malloc)" % project_version())
        self.assertRegex(lines[1], r"^nghttp2 \d+\.\d+\.\d+, linked into the binary$")

    def test_every_shipped_config_passes_check_in_the_image(self):
        in_image = set()
        etc = os.path.join(self.root, "etc", "onelayer")
        for d, _, files in os.walk(etc):
            in_image |= {os.path.relpath(os.path.join(d, f), etc) for f in files if f.endswith(".yaml")}
        self.assertEqual(in_image, shipped_configs())
        for rel in sorted(in_image):
            with self.subTest(config=rel):
                with open(os.path.join(etc, rel)) as f:
                    text = f.read()
                # Files an example names under /etc/onelayer/ that the image
                # does not ship (certificates, keys, a token: the user mounts
                # them) get stand-ins, as in test_deploy's check of config/.
                absent = sorted({n for n in re.findall(r"/etc/onelayer/([\w.-]+)", text)
                                 if not os.path.exists(os.path.join(etc, n))})
                if not absent:
                    p = self.in_image(["--check", "--config", "/etc/onelayer/" + rel])
                else:
                    work = self.stand_ins(absent)
                    for name in absent:
                        text = text.replace("/etc/onelayer/" + name, TEST_DIR + "/" + name)
                    with open(os.path.join(work, "config.yaml"), "w") as f:
                        f.write(text)
                    os.chmod(os.path.join(work, "config.yaml"), 0o644)
                    p = self.in_image(["--check", "--config", TEST_DIR + "/config.yaml"],
                                      binds=[(work, TEST_DIR, False)])
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def stand_ins(self, names):
        """A directory readable by the image's user holding stand-ins for
        `names` (test_deploy.make_example_files), to mount at TEST_DIR."""
        work = tempfile.mkdtemp(prefix="onelayer-image-files-")
        self.addCleanup(shutil.rmtree, work, True)
        os.chmod(work, 0o755)
        return test_deploy.make_example_files(names, work)

    def test_check_in_the_image_rejects_a_bad_config(self):
        # Guards the test above: a --check that passes everything proves nothing.
        bad = os.path.join(self.tmp, "bad.yaml")
        with open(bad, "w") as f:
            f.write("listeners:\n  - name: x\n    listen: 127.0.0.1:15001\n    bogus_key: 1\n")
        p = self.in_image(["--check", "--config", TEST_DIR + "/bad.yaml"], binds=[(self.tmp, TEST_DIR, False)])
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("bogus_key", p.stdout + p.stderr)

    def test_serves_the_demo_upstream_with_the_default_config_and_stops_on_sigterm(self):
        demo_bin = os.environ.get("ONELAYER_DEMO_BIN", "")
        self.assertTrue(os.access(demo_bin, os.X_OK), "ONELAYER_DEMO_BIN=%r (set by ctest)" % demo_bin)
        work = tempfile.mkdtemp(dir=self.tmp)
        os.chown(work, *(int(x) for x in IMAGE_USER.split(":")))
        demo_ports = os.path.join(work, "demo.ports")
        demo = subprocess.Popen([demo_bin, "--listen", "127.0.0.1:0", "--ports-file", demo_ports],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(stop, demo)
        demo_port = wait_for_ports(demo_ports, ["demo"], demo)["demo"]

        # The shipped default config, with ports the kernel picks and the
        # demo upstream's port: mounted over the image's own, as the README's
        # `docker run -v my.yaml:/etc/onelayer/onelayer.yaml:ro` does.
        with open(os.path.join(SOURCE_DIR, "config", "onelayer.yaml")) as f:
            text = f.read()
        for old, new in (("listen: 127.0.0.1:9901", "listen: 127.0.0.1:0"),
                         ("listen: 127.0.0.1:15001", "listen: 127.0.0.1:0"),
                         ("endpoints: [127.0.0.1:8081]", "endpoints: [127.0.0.1:%d]" % demo_port)):
            self.assertEqual(text.count(old), 1, "config/onelayer.yaml no longer has %r" % old)
            text = text.replace(old, new)
        config = os.path.join(work, "onelayer.yaml")
        with open(config, "w") as f:
            f.write(text)

        binds = [(config, "/etc/onelayer/onelayer.yaml", False), (work, TEST_DIR, True)]
        # The image's default arguments, plus the ports file.
        cmd = self.runner.command(self.config["Cmd"] + ["--ports-file", TEST_DIR + "/ports"], binds=binds)
        err = open(os.path.join(self.tmp, "onelayer.stderr"), "w+")
        self.addCleanup(err.close)
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        self.addCleanup(stop, proc)
        try:
            ports = wait_for_ports(os.path.join(work, "ports"), ["outbound", "admin"], proc)
        except AssertionError:
            err.seek(0)
            raise AssertionError("onelayer in the image did not start:\n" + err.read()[-3000:])

        if isinstance(self.runner, ChrootRunner):
            with open("/proc/%d/status" % proc.pid) as f:
                uid = re.search(r"^Uid:\s+(\d+)", f.read(), re.M).group(1)
            self.assertEqual(uid, IMAGE_USER.split(":")[0], "onelayer runs as the image's user")

        status, headers, body = get(ports["outbound"], "/hello")
        self.assertEqual((status, body), (200, "hello from the demo upstream\n"))
        self.assertIn("onelayer", headers.get("via", ""))
        # /flaky fails twice out of three; the default config's route retries.
        status, _, body = get(ports["outbound"], "/flaky")
        self.assertEqual((status, body), (200, "flaky: third time lucky\n"))
        status, _, metrics = get(ports["admin"], "/metrics")
        self.assertEqual(status, 200)
        retries = sum(float(v) for v in re.findall(
            r'^onelayer_retries_total\{[^}]*route="demo-flaky"[^}]*\} (\S+)$', metrics, re.M))
        self.assertEqual(retries, 2, metrics)

        # The image's HEALTHCHECK command, run in the image against it.
        check = self.image["Healthcheck"]["Test"][1:]
        env = {"ONELAYER_ADMIN_PORT": str(ports["admin"])}
        p = self.in_image([], entrypoint=check, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)

        proc.send_signal(signal.SIGTERM)  # the image's STOPSIGNAL
        self.assertEqual(proc.wait(30), 0)
        p = self.in_image([], entrypoint=check, env=env)
        self.assertEqual(p.returncode, 1, "the health check passes with onelayer stopped")


if __name__ == "__main__":
    unittest.main()
