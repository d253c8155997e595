#!/usr/bin/env python3
"""What a TLS client's handshakes ask of the server, seen on the wire.

`relay --port P --to Q` listens on 127.0.0.1:P and passes every connection
on to 127.0.0.1:Q unchanged, reading the first TLS records each way: per
connection it prints one line saying which key shares the ClientHello
carried, which groups it supports, whether it offered a pre-shared key
(resumption) and with which key exchange modes, whether the server answered
with a HelloRetryRequest (a key share it did not want: one more round trip
and a second ClientHello) and whether the server accepted the pre-shared key
(a resumed handshake). tests/bench/profile.sh --tls-handshake puts it
between the proxy and the origin for a few requests. Standard library only;
TLS 1.3 only (a TLS 1.2 ServerHello reads as neither).
"""
import argparse
import socket
import sys
import threading

GROUPS = {0x0017: "secp256r1", 0x0018: "secp384r1", 0x0019: "secp521r1", 0x001D: "x25519",
          0x001E: "x448", 0x0100: "ffdhe2048", 0x0101: "ffdhe3072", 0x0102: "ffdhe4096",
          0x0103: "ffdhe6144", 0x0104: "ffdhe8192", 0x11EC: "X25519MLKEM768"}
PSK_MODES = {0: "psk_ke", 1: "psk_dhe_ke"}
EXT_SUPPORTED_GROUPS, EXT_PRE_SHARED_KEY, EXT_PSK_MODES, EXT_KEY_SHARE = 10, 41, 45, 51
# RFC 8446 4.1.3: a ServerHello with this random is a HelloRetryRequest.
HRR_RANDOM = bytes.fromhex("CF21AD74E59A6111BE1D8C021E65B891C2A211167ABB8C5E079E09E2C8A8339C")


def group_name(g):
    return GROUPS.get(g, "0x%04x" % g)


def first_handshake_message(data):
    """The first handshake message in `data` (TLS records from the start of a
    connection): (type, body), or None while incomplete."""
    if len(data) < 5 or data[0] != 22:
        return None
    rec_len = int.from_bytes(data[3:5], "big")
    if len(data) < 5 + rec_len or rec_len < 4:
        return None
    rec = data[5:5 + rec_len]
    msg_len = int.from_bytes(rec[1:4], "big")
    if len(rec) < 4 + msg_len:
        return None  # a message over several records: not a hello
    return rec[0], rec[4:4 + msg_len]


def extensions(body, at):
    """{type: data} of the extensions block starting at `at`."""
    out = {}
    if at + 2 > len(body):
        return out
    end = at + 2 + int.from_bytes(body[at:at + 2], "big")
    at += 2
    while at + 4 <= end:
        t = int.from_bytes(body[at:at + 2], "big")
        n = int.from_bytes(body[at + 2:at + 4], "big")
        out[t] = body[at + 4:at + 4 + n]
        at += 4 + n
    return out


def parse_client_hello(body):
    """A ClientHello's body: key share groups, supported groups, PSK offered
    and its modes."""
    at = 2 + 32  # legacy_version, random
    at += 1 + body[at]  # legacy_session_id
    at += 2 + int.from_bytes(body[at:at + 2], "big")  # cipher_suites
    at += 1 + body[at]  # legacy_compression_methods
    ext = extensions(body, at)
    groups = []
    if EXT_SUPPORTED_GROUPS in ext:
        g = ext[EXT_SUPPORTED_GROUPS]
        groups = [int.from_bytes(g[i:i + 2], "big") for i in range(2, 2 + int.from_bytes(g[:2], "big"), 2)]
    shares = []
    if EXT_KEY_SHARE in ext:
        k = ext[EXT_KEY_SHARE]
        i, end = 2, 2 + int.from_bytes(k[:2], "big")
        while i + 4 <= end:
            shares.append(int.from_bytes(k[i:i + 2], "big"))
            i += 4 + int.from_bytes(k[i + 2:i + 4], "big")
    modes = [PSK_MODES.get(m, str(m)) for m in ext.get(EXT_PSK_MODES, b"\x00")[1:]]
    return {"key_shares": [group_name(g) for g in shares], "groups": [group_name(g) for g in groups],
            "psk": EXT_PRE_SHARED_KEY in ext, "psk_modes": modes}


def parse_server_hello(body):
    """A ServerHello's body: whether it is a HelloRetryRequest, whether it
    accepted a PSK, and the key share group it chose (or asks for)."""
    at = 2 + 32
    hrr = body[2:34] == HRR_RANDOM
    at += 1 + body[at]  # legacy_session_id_echo
    at += 2 + 1  # cipher_suite, legacy_compression_method
    ext = extensions(body, at)
    group = None
    if EXT_KEY_SHARE in ext and len(ext[EXT_KEY_SHARE]) >= 2:
        group = group_name(int.from_bytes(ext[EXT_KEY_SHARE][:2], "big"))
    return {"hrr": hrr, "resumed": EXT_PRE_SHARED_KEY in ext, "group": group}


def describe(client, server):
    """One line for a connection from its parsed ClientHello and ServerHello."""
    if client is None:
        return "no ClientHello"
    line = "key_shares=%s groups=%s psk=%s" % (",".join(client["key_shares"]) or "-",
                                              ",".join(client["groups"]) or "-",
                                              ("yes(" + ",".join(client["psk_modes"]) + ")") if client["psk"] else "no")
    if server is None:
        return line + " server=none"
    return line + " hrr=%s resumed=%s group=%s" % ("yes" if server["hrr"] else "no",
                                                   "yes" if server["resumed"] else "no", server["group"] or "-")


def pump(src, dst, seen, key, lock, done):
    buf = b""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if key not in seen and len(buf) < 65536:
                buf += data
                msg = first_handshake_message(buf)
                if msg is not None:
                    with lock:
                        seen[key] = msg
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        done.set()


def serve(conn, to_port, lock, out):
    try:
        up = socket.create_connection(("127.0.0.1", to_port))
    except OSError as e:
        conn.close()
        with lock:
            print("cannot reach the origin: %s" % e, file=out, flush=True)
        return
    seen = {}
    done_a, done_b = threading.Event(), threading.Event()
    threading.Thread(target=pump, args=(conn, up, seen, "client", lock, done_a), daemon=True).start()
    threading.Thread(target=pump, args=(up, conn, seen, "server", lock, done_b), daemon=True).start()
    done_a.wait()
    done_b.wait()
    conn.close()
    up.close()
    client = server = None
    if seen.get("client", (0,))[0] == 1:
        client = parse_client_hello(seen["client"][1])
    if seen.get("server", (0,))[0] == 2:
        server = parse_server_hello(seen["server"][1])
    with lock:
        print(describe(client, server), file=out, flush=True)


def relay(port, to_port, out=sys.stdout):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(64)
    lock = threading.Lock()
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=serve, args=(conn, to_port, lock, out), daemon=True).start()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("relay")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--to", type=int, required=True)
    a = ap.parse_args()
    if a.cmd == "relay":
        relay(a.port, a.to)
    return 0


if __name__ == "__main__":
    sys.exit(main())
