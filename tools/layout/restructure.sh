#!/usr/bin/env bash
# restructure.sh: moves onelayer's flat proxy/core and proxy/shell into
# packages by concern (issue 50). Run at the top of a clean checkout derived
# from main (other branches' edits and new files are fine); it is
# deterministic and refuses to run twice. Steps:
#   1. git mv every known flat source file to proxy/<layer>/<package>/<name>
#      (MAP below; a flat file it does not know stops it before any change);
#      files already in subfolders (fleet/, transparent/, ...) stay.
#   2. git mv unit tests to mirror the sources (tests/unit/<layer>/<package>/).
#   3. rewrite every #include "core/x.h" / "shell/x.h" and every path
#      mention (proxy/shell/x.cc, tests/unit/core/x_test.cc, bare renamed
#      file names) in every tracked text file.
#   4. rename classes by word boundary (CLASSES below) in proxy/, tests/,
#      docs/, README.md.
#   5. write the package table (proxy/packages.txt), the CMake that builds one
#      target per package (cmake/packages.cmake) and the layering check
#      (cmake/check_layering.py), and point CMakeLists.txt at them.
#   6. record the includes that still point up the layers in
#      proxy/layering_exceptions.txt (so the build passes and they are listed).
set -euo pipefail
[ -d proxy/core ] && [ -d proxy/shell ] && [ -f CMakeLists.txt ] || { echo "restructure.sh: run at the top of an onelayer checkout" >&2; exit 2; }
if [ -f proxy/packages.txt ]; then echo "restructure.sh: already restructured (proxy/packages.txt exists)" >&2; exit 2; fi
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then echo "restructure.sh: commit or stash your changes first" >&2; exit 2; fi
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec /usr/bin/python3 - "$SCRIPT_DIR" <<'PY'
import os, re, subprocess, sys

# ---- 1. old path (under proxy/) -> new path (under proxy/) -------------------
MAP = """
core/ascii_words.h              core/base/ascii_words.h
core/clock.h                    core/base/clock.h
core/clock.cc                   core/base/clock.cc
core/grpc_status.h              core/base/grpc_status.h
core/grpc_status.cc             core/base/grpc_status.cc
core/http_status.h              core/base/http_status.h
core/http_status.cc             core/base/http_status.cc
core/config.h                   core/config/config.h
core/config.cc                  core/config/config.cc
core/config_loader.h            core/config/config_loader.h
core/config_loader.cc           core/config/config_loader.cc
core/units.h                    core/config/units.h
core/units.cc                   core/config/units.cc
core/http_headers.h             core/http/http_headers.h
core/http_headers.cc            core/http/http_headers.cc
core/baggage.h                  core/http/baggage.h
core/baggage.cc                 core/http/baggage.cc
core/hidden_retry_detector.h    core/http/hidden_retry_detector.h
core/hidden_retry_detector.cc   core/http/hidden_retry_detector.cc
core/retry_after.h              core/http/retry_after.h
core/retry_after.cc             core/http/retry_after.cc
core/grpc_protocol.h            core/grpc/grpc_protocol.h
core/grpc_protocol.cc           core/grpc/grpc_protocol.cc
core/grpc_timeout.h             core/grpc/grpc_timeout.h
core/grpc_timeout.cc            core/grpc/grpc_timeout.cc
core/grpc_error_answer.h        core/grpc/grpc_error_answer.h
core/grpc_error_answer.cc       core/grpc/grpc_error_answer.cc
core/grpc_pushback.h            core/grpc/grpc_pushback.h
core/grpc_pushback.cc           core/grpc/grpc_pushback.cc
core/route_match.h              core/request/route_match.h
core/route_match.cc             core/request/route_match.cc
core/request_validation.h       core/request/request_validation.h
core/request_validation.cc      core/request/request_validation.cc
core/request_deadline.h         core/request/request_deadline.h
core/request_deadline.cc        core/request/request_deadline.cc
core/request_signal_fields.h    core/request/request_signal_fields.h
core/request_signal_fields.cc   core/request/request_signal_fields.cc
core/fault_injector.h           core/request/fault_injector.h
core/fault_injector.cc          core/request/fault_injector.cc
core/retry.h                    core/retry/retry.h
core/retry.cc                   core/retry/retry.cc
core/retry_reasons.h            core/retry/retry_reasons.h
core/retry_reasons.cc           core/retry/retry_reasons.cc
core/retry_budget.h             core/retry/retry_budget.h
core/retry_budget.cc            core/retry/retry_budget.cc
core/request_window.h           core/retry/request_window.h
core/request_window.cc          core/retry/request_window.cc
core/circuit_breaker.h          core/retry/circuit_breaker.h
core/circuit_breaker.cc         core/retry/circuit_breaker.cc
core/load_shedder.h             core/retry/load_shedder.h
core/load_shedder.cc            core/retry/load_shedder.cc
core/replay_body.h              core/retry/replay_body.h
core/replay_body.cc             core/retry/replay_body.cc
core/grpc_attempt.h             core/retry/grpc_attempt.h
core/grpc_attempt.cc            core/retry/grpc_attempt.cc
core/upstream_endpoints.h       core/upstream/upstream_endpoints.h
core/upstream_endpoints.cc      core/upstream/upstream_endpoints.cc
core/endpoint_balancer.h        core/upstream/endpoint_balancer.h
core/endpoint_balancer.cc       core/upstream/endpoint_balancer.cc
core/peak_ewma.h                core/upstream/peak_ewma.h
core/peak_ewma.cc               core/upstream/peak_ewma.cc
core/outlier_detector.h         core/upstream/outlier_detector.h
core/outlier_detector.cc        core/upstream/outlier_detector.cc
core/metrics.h                  core/metrics/metrics.h
core/metrics.cc                 core/metrics/metrics.cc
core/h2_frame_header.h          core/h2wire/h2_frame_header.h
core/h2_header_block_extractor.h  core/h2wire/h2_header_block_extractor.h
core/h2_header_block_extractor.cc core/h2wire/h2_header_block_extractor.cc
core/h2_message_rules.h         core/h2wire/h2_message_rules.h
core/h2_message_rules.cc        core/h2wire/h2_message_rules.cc
core/hpack_decoder.h            core/h2wire/hpack_decoder.h
core/hpack_decoder.cc           core/h2wire/hpack_decoder.cc
core/hpack_encoder.h            core/h2wire/hpack_encoder.h
core/hpack_encoder.cc           core/h2wire/hpack_encoder.cc
core/hpack_huffman.h            core/h2wire/hpack_huffman.h
core/hpack_huffman.cc           core/h2wire/hpack_huffman.cc
core/hpack_static_table.h       core/h2wire/hpack_static_table.h
shell/freed_memory.h            shell/memory/freed_memory.h
shell/freed_memory.cc           shell/memory/freed_memory.cc
shell/recycled_blocks.h         shell/memory/recycled_blocks.h
shell/recycled_blocks.cc        shell/memory/recycled_blocks.cc
shell/spare_list.h              shell/memory/spare_list.h
shell/spare_string_rooms.h      shell/memory/spare_string_rooms.h
shell/h2_memory_pool.h          shell/memory/h2_memory_pool.h
shell/h2_memory_pool.cc         shell/memory/h2_memory_pool.cc
shell/openssl_library.h         shell/tls/openssl_library.h
shell/openssl_library.cc        shell/tls/openssl_library.cc
shell/tls_channel.h             shell/tls/tls_channel.h
shell/tls_channel.cc            shell/tls/tls_channel.cc
shell/tls_context.h             shell/tls/tls_context.h
shell/tls_context.cc            shell/tls/tls_context.cc
shell/handle_wrap.h             shell/io/handle_wrap.h
shell/timer_list.h              shell/io/timer_list.h
shell/timer_list.cc             shell/io/timer_list.cc
shell/deferred_writer.h         shell/io/deferred_writer.h
shell/socket_address.h          shell/io/socket_address.h
shell/socket_address.cc         shell/io/socket_address.cc
shell/logging.h                 shell/io/logging.h
shell/logging.cc                shell/io/logging.cc
shell/conn.h                    shell/io/conn.h
shell/conn.cc                   shell/io/conn.cc
shell/downstream_stream.h       shell/stream/downstream_stream.h
shell/upstream_stream.h         shell/stream/upstream_stream.h
shell/http_codec.h              shell/http1/http_parser.h
shell/http_codec.cc             shell/http1/http_parser.cc
shell/http_parser_pool.h        shell/http1/http_parser_pool.h
shell/http1_encoder.h           shell/http1/http1_body_encoder.h
shell/http1_encoder.cc          shell/http1/http1_body_encoder.cc
shell/downstream.h              shell/http1/http1_server_connection.h
shell/downstream.cc             shell/http1/http1_server_connection.cc
shell/upstream.h                shell/http1/http1_client_connection.h
shell/upstream.cc               shell/http1/http1_client_connection.cc
shell/tunnel.cc                 shell/http1/http1_tunnel.cc
shell/h2_session.h              shell/http2/h2_session.h
shell/h2_session.cc             shell/http2/h2_session.cc
shell/h2_field_block.h          shell/http2/h2_field_block.h
shell/h2_field_block.cc         shell/http2/h2_field_block.cc
shell/h2_request_head.h         shell/http2/h2_request_head.h
shell/h2_request_head.cc        shell/http2/h2_request_head.cc
shell/h2_downstream.h           shell/http2/h2_server_connection.h
shell/h2_downstream.cc          shell/http2/h2_server_connection.cc
shell/h2_down_stream.h          shell/http2/h2_server_stream.h
shell/h2_down_stream.cc         shell/http2/h2_server_stream.cc
shell/h2_upstream.h             shell/http2/h2_client_connection.h
shell/h2_upstream.cc            shell/http2/h2_client_connection.cc
shell/h2_upstream_stream.h      shell/http2/h2_client_stream.h
shell/h2_upstream_stream.cc     shell/http2/h2_client_stream.cc
shell/runtime.h                 shell/proxy/runtime.h
shell/runtime.cc                shell/proxy/runtime.cc
shell/exchange.h                shell/proxy/exchange.h
shell/exchange.cc               shell/proxy/exchange.cc
shell/attempt.h                 shell/proxy/attempt.h
shell/request_admission.h       shell/proxy/request_admission.h
shell/request_admission.cc      shell/proxy/request_admission.cc
shell/proxy_responses.h         shell/proxy/proxy_responses.h
shell/proxy_responses.cc        shell/proxy/proxy_responses.cc
shell/endpoint_state.h          shell/proxy/endpoint_state.h
shell/endpoint_state.cc         shell/proxy/endpoint_state.cc
shell/endpoint_log.h            shell/proxy/endpoint_log.h
shell/endpoint_log.cc           shell/proxy/endpoint_log.cc
shell/health_checker.h          shell/health/health_checker.h
shell/health_checker.cc         shell/health/health_checker.cc
shell/h2_health_probe.h         shell/health/h2_health_probe.h
shell/h2_health_probe.cc        shell/health/h2_health_probe.cc
shell/admin_server.h            shell/admin/admin_server.h
shell/admin_server.cc           shell/admin/admin_server.cc
shell/server.h                  shell/server/server.h
shell/server.cc                 shell/server/server.cc
shell/worker.h                  shell/server/worker.h
shell/worker.cc                 shell/server/worker.cc
shell/worker_listener.h         shell/server/worker_listener.h
shell/worker_listener.cc        shell/server/worker_listener.cc
shell/parked_connections.h      shell/server/parked_connections.h
shell/parked_connections.cc     shell/server/parked_connections.cc
"""

# ---- 2. unit tests: by source stem, and these whose name names no file -------
TEST_EXTRA = """
core/config_endpoint_health_test.cc   core/config/config_endpoint_health_test.cc
core/config_grpc_test.cc              core/config/config_grpc_test.cc
core/config_protocols_test.cc         core/config/config_protocols_test.cc
core/config_tls_test.cc               core/config/config_tls_test.cc
core/storm_config_test.cc             core/config/storm_config_test.cc
core/grpc_request_rewrite_test.cc     core/http/grpc_request_rewrite_test.cc
core/retry_grpc_test.cc               core/retry/retry_grpc_test.cc
shell/access_log_test.cc              shell/io/access_log_test.cc
shell/handle_lifetime_test.cc         shell/io/handle_lifetime_test.cc
shell/worker_deferred_write_test.cc   shell/server/worker_deferred_write_test.cc
shell/h2_session_hpack_test.cc        shell/http2/h2_session_hpack_test.cc
shell/hpack_decoder_roundtrip_test.cc shell/http2/hpack_decoder_roundtrip_test.cc
shell/hpack_encoder_roundtrip_test.cc shell/http2/hpack_encoder_roundtrip_test.cc
"""

# ---- 4. class renames (word boundary) ---------------------------------------
CLASSES = [
    ("H2Downstream", "H2ServerConnection"),
    ("H2DownstreamTest", "H2ServerConnectionTest"),
    ("H2DownStream", "H2ServerStream"),
    ("H2UpConn", "H2ClientConnection"),
    ("H2UpStream", "H2ClientStream"),
    ("DownConn", "Http1ServerConnection"),
    ("DownConns", "Http1ServerConnections"),
    ("UpConn", "Http1ClientConnection"),
]

def table(text):
    return [tuple(l.split()) for l in text.strip().splitlines() if l.strip()]

def git(*args, capture=False):
    r = subprocess.run(["git", *args], check=True, text=True,
                       stdout=subprocess.PIPE if capture else None)
    return r.stdout if capture else None

src_map = dict(table(MAP))
assert len(set(src_map.values())) == len(src_map), "two files map to one path"

# Every flat file must be known before anything moves.
flat = []
for layer in ("core", "shell"):
    for f in sorted(os.listdir(f"proxy/{layer}")):
        if os.path.isfile(f"proxy/{layer}/{f}"):
            flat.append(f"{layer}/{f}")
unknown = [f for f in flat if f not in src_map]
if unknown:
    sys.exit("restructure.sh: no package for these files; add them to MAP and run again:\n  " + "\n  ".join(unknown))
missing = [f for f in src_map if f not in flat]
if missing:
    print("restructure.sh: note: not present, skipped: " + ", ".join(missing))

def stem(p):
    return os.path.splitext(p)[0]

# Step 1: sources.
moves = []  # (old repo path, new repo path)
for old, new in sorted(src_map.items()):
    if old in flat:
        moves.append((f"proxy/{old}", f"proxy/{new}"))

# Step 2: tests mirror the sources.
stem_map = {stem(o): stem(n) for o, n in src_map.items()}
test_extra = dict(table(TEST_EXTRA))
test_moves = []
for layer in ("core", "shell"):
    d = f"tests/unit/{layer}"
    for f in sorted(os.listdir(d)):
        if not os.path.isfile(f"{d}/{f}") or not f.endswith("_test.cc"):
            continue
        key = f"{layer}/{f}"
        if key in test_extra:
            test_moves.append((f"{d}/{f}", f"tests/unit/{test_extra[key]}"))
        elif f"{layer}/{f[:-len('_test.cc')]}" in stem_map:
            new = stem_map[f"{layer}/{f[:-len('_test.cc')]}"]
            test_moves.append((f"{d}/{f}", f"tests/unit/{new}_test.cc"))
        else:
            print(f"restructure.sh: note: {d}/{f} names no known source; left where it is")

for old, new in moves + test_moves:
    os.makedirs(os.path.dirname(new), exist_ok=True)
    git("mv", old, new)
moved_tests = {new for _, new in test_moves}

# Step 3: includes and path mentions, one pass per file.
path_map = {}   # "core/x.h" -> "core/pkg/y.h", and the same without extension
for o, n in src_map.items():
    path_map[o] = n
    path_map.setdefault(stem(o), stem(n))
test_path_map = {o[len("tests/unit/"):]: n[len("tests/unit/"):] for o, n in test_moves}
renamed_files = {}  # bare file names whose name changed: "downstream.cc" -> "http1_server_connection.cc"
for o, n in src_map.items():
    if os.path.basename(o) != os.path.basename(n):
        renamed_files[os.path.basename(o)] = os.path.basename(n)
for o, n in test_moves:
    if os.path.basename(o) != os.path.basename(n):
        renamed_files[os.path.basename(o)] = os.path.basename(n)

def alt(keys):
    return "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))

# (a) tests/unit/<layer>/<file>; (b) [proxy/]<layer>/<file or stem>; (c) bare renamed file name.
# A path is not rewritten when a "/" or a word character continues it, so
# "shell/server" inside "shell/server/worker.h" stays as it is.
path_re = re.compile(
    r"(?<![\w/.-])(tests/unit/)(" + alt(test_path_map) + r")(?![\w/])"
    r"|(?<![\w.-])(proxy/|(?<![\w/.-]))(" + alt(path_map) + r")(?![\w/]|\.(?:h|cc)\b)"
    r"|(?<![\w/.-])(" + alt(renamed_files) + r")(?![\w/])")

def rewrite_paths(text):
    def sub(m):
        if m.group(2):
            return m.group(1) + test_path_map[m.group(2)]
        if m.group(4):
            return m.group(3) + path_map[m.group(4)]
        return renamed_files[m.group(5)]
    return path_re.sub(sub, text)

class_re = re.compile(r"\b(" + alt(dict(CLASSES)) + r")\b")
class_map = dict(CLASSES)

def tracked_text_files():
    out = git("ls-files", "-z", capture=True)
    for p in out.split("\0"):
        if not p or p.startswith("Testing/") or not os.path.isfile(p):
            continue
        with open(p, "rb") as fh:
            data = fh.read()
        if b"\0" in data:
            continue
        try:
            yield p, data.decode("utf-8")
        except UnicodeDecodeError:
            continue

changed = 0
for p, text in tracked_text_files():
    new = rewrite_paths(text)
    if p in moved_tests:
        # helpers stay in tests/unit/core and tests/unit/shell, which are on
        # the tests' include path: "../core/x.h" becomes "x.h"
        new = re.sub(r'#include "\.\./core/([\w.]+)"', r'#include "\1"', new)
    # Step 4: class names, in the code, the tests and the docs.
    if p.startswith(("proxy/", "tests/", "docs/")) or p == "README.md":
        new = class_re.sub(lambda m: class_map[m.group(1)], new)
    if new != text:
        with open(p, "w", encoding="utf-8") as fh:
            fh.write(new)
        changed += 1
print(f"restructure.sh: moved {len(moves)} sources and {len(test_moves)} tests, rewrote {changed} files")

# Step 5: package table, CMake, layering check.
tools = sys.argv[1]
for name, dest in (("packages.txt", "proxy/packages.txt"),
                   ("packages.cmake", "cmake/packages.cmake"),
                   ("check_layering.py", "cmake/check_layering.py")):
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with open(os.path.join(tools, "files", name)) as src, open(dest, "w") as dst:
        dst.write(src.read())
os.chmod("cmake/check_layering.py", 0o755)

# CMakeLists.txt: the two library blocks become the package include.
with open("CMakeLists.txt") as fh:
    cm = fh.read()
start = cm.index("# Pure core: config model and loader")
end = cm.index("add_executable(onelayer ")
block = cm[start:end]
known = {l.strip() for l in open(os.path.join(tools, "files", "cmake_block.txt")).read().splitlines()}
extra = [l for l in block.splitlines() if l.strip() and l.strip() not in known]
if extra:
    print("restructure.sh: WARNING: these lines of CMakeLists.txt's library block are new to the script;\n"
          "  they are kept after the package include, check them:\n    " + "\n    ".join(extra))
new_block = ("find_package(Threads REQUIRED)\n"
             "# One target per package (proxy/packages.txt): cmake/packages.cmake.\n"
             "include(${CMAKE_SOURCE_DIR}/cmake/packages.cmake)\n\n")
if extra:
    new_block += "\n".join(extra) + "\n\n"
cm = cm[:start] + new_block + cm[end:]
with open("CMakeLists.txt", "w") as fh:
    fh.write(cm)

# tests/CMakeLists.txt: the helpers' folders on the tests' include path.
with open("tests/CMakeLists.txt") as fh:
    tc = fh.read()
tc = tc.replace(
    "target_link_libraries(core_tests PRIVATE onelayer_core doctest::doctest)\n",
    "target_link_libraries(core_tests PRIVATE onelayer_core doctest::doctest)\n"
    "# Test helpers (scripted_random.h, ...) sit at the top of unit/core and unit/shell.\n"
    "target_include_directories(core_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit/core)\n", 1)
tc = tc.replace(
    "  target_link_libraries(shell_tests PRIVATE onelayer_shell doctest::doctest OpenSSL::SSL OpenSSL::Crypto)\n",
    "  target_link_libraries(shell_tests PRIVATE onelayer_shell doctest::doctest OpenSSL::SSL OpenSSL::Crypto)\n"
    "  target_include_directories(shell_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit/shell ${CMAKE_CURRENT_SOURCE_DIR}/unit/core)\n", 1)
with open("tests/CMakeLists.txt", "w") as fh:
    fh.write(tc)

# Step 6: includes that point up today, recorded with the reason they stay.
r = subprocess.run(["/usr/bin/python3", "cmake/check_layering.py", "--write-exceptions", "proxy/layering_exceptions.txt", "."],
                   text=True)
if r.returncode != 0:
    sys.exit("restructure.sh: the layering check failed")
git("add", "-u")
git("add", "proxy", "tests", "cmake")
print("restructure.sh: done; review with git status, build, and commit")
PY
