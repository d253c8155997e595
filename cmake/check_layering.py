#!/usr/bin/env python3
"""Fails when a file of proxy/core or proxy/shell includes a header of a
package it may not include (proxy/packages.txt), unless the include is listed
in proxy/layering_exceptions.txt. Runs before every build (cmake/packages.cmake).

  check_layering.py SOURCE_DIR [--stamp FILE]
"""
import fnmatch, os, re, sys

LAYERS = ("core", "shell")
# Third-party headers that only the packages naming the library may include.
RESTRICTED = {"llhttp": re.compile(r"llhttp\.h$"), "nghttp2": re.compile(r"nghttp2/"),
              "yaml-cpp": re.compile(r"yaml-cpp/"), "hiredis": re.compile(r"hiredis/")}
# Closed to the whole core: the core does no I/O and no logging.
CORE_CLOSED = re.compile(r"^(uv\.h|llhttp\.h|nghttp2/|spdlog/|fmt/|openssl/|hiredis/)")


def read_table(src):
    order, deps, libs = [], {}, {}
    with open(os.path.join(src, "proxy", "packages.txt")) as fh:
        for line in fh:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            left, _, right = line.partition("|")
            words = left.split()
            order.append(words[0])
            deps[words[0]] = words[1:]
            libs[words[0]] = right.split()
    for layer in LAYERS:
        for d in sorted(os.listdir(os.path.join(src, "proxy", layer))):
            name = f"{layer}/{d}"
            if os.path.isdir(os.path.join(src, "proxy", name)) and name not in deps:
                deps[name] = ["*-top"]
                libs[name] = []
                order.append(name)
    return order, deps, libs


def allowed_packages(order, deps):
    def expand(p):
        out = []
        layer = p.split("/")[0]
        for d in deps[p]:
            if d == "*":
                out += [q for q in order if q != p and q.startswith(layer + "/")]
            elif d == "*-top":
                out += [q for q in order if q != p and q.startswith(layer + "/") and deps[q] not in (["*"], ["*-top"])]
            else:
                out.append(d)
        return out
    allowed = {}
    for p in order:
        seen, todo = {p}, list(expand(p))
        while todo:
            q = todo.pop()
            if q in seen or q not in deps:
                continue
            seen.add(q)
            todo += expand(q)
        if p.startswith("shell/"):
            seen |= {q for q in order if q.startswith("core/")}
        allowed[p] = seen
    return allowed


def package_of(path):  # "core/retry/retry.h" -> "core/retry"
    parts = path.split("/")
    return "/".join(parts[:2]) if len(parts) >= 3 and parts[0] in LAYERS else None


INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def violations(src):
    order, deps, libs = read_table(src)
    allowed = allowed_packages(order, deps)
    found = []
    for layer in LAYERS:
        root = os.path.join(src, "proxy", layer)
        for d, _, files in sorted(os.walk(root)):
            for f in sorted(files):
                if not f.endswith((".h", ".cc")):
                    continue
                rel = os.path.relpath(os.path.join(d, f), os.path.join(src, "proxy"))
                pkg = package_of(rel)
                if pkg is None:
                    found.append((rel, "(no package)", "a file must sit in a package folder"))
                    continue
                with open(os.path.join(d, f), encoding="utf-8") as fh:
                    text = fh.read()
                for kind, inc in INCLUDE.findall(text):
                    if kind == '"':
                        target = package_of(inc)
                        if target and target not in allowed[pkg]:
                            found.append((rel, inc, f"{pkg} may not include {target}"))
                        continue
                    if pkg.startswith("core/") and CORE_CLOSED.search(inc):
                        found.append((rel, f"<{inc}>", "the core does no I/O"))
                        continue
                    for lib, pattern in RESTRICTED.items():
                        if pattern.search(inc) and lib not in libs[pkg]:
                            found.append((rel, f"<{inc}>", f"only packages that link {lib} include it"))
    return found


def read_exceptions(path):
    out = []
    if os.path.exists(path):
        with open(path) as fh:
            for line in fh:
                body = line.split("#", 1)[0].strip()
                if "->" in body:
                    a, b = (s.strip() for s in body.split("->", 1))
                    out.append((a, b))
    return out


def main(argv):
    stamp = None
    args = []
    i = 0
    while i < len(argv):
        if argv[i] == "--stamp":
            stamp = argv[i + 1]; i += 2
        else:
            args.append(argv[i]); i += 1
    src = args[0] if args else "."
    found = violations(src)
    exceptions = read_exceptions(os.path.join(src, "proxy", "layering_exceptions.txt"))
    bad, used = [], set()
    for rel, inc, why in found:
        hit = [e for e in exceptions if fnmatch.fnmatch(rel, e[0]) and fnmatch.fnmatch(inc, e[1])]
        if hit:
            used.update(hit)
        else:
            bad.append((rel, inc, why))
    for e in exceptions:
        if e not in used:
            print(f"check_layering: note: proxy/layering_exceptions.txt lists '{e[0]} -> {e[1]}', "
                  "which no longer occurs: remove the line")
    if bad:
        for rel, inc, why in bad:
            print(f"proxy/{rel}: includes {inc}: {why} (proxy/packages.txt)", file=sys.stderr)
        print(f"check_layering: {len(bad)} include(s) go up the layers", file=sys.stderr)
        return 1
    if stamp:
        with open(stamp, "w") as fh:
            fh.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
