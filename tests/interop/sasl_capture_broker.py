"""A stand-in Kafka listener that records SASL/OAUTHBEARER logins and refuses them, for the
AWS MSK IAM test in crates/floe-cli/tests/kafka_security.rs.

No broker that can be installed here validates MSK IAM tokens (that needs AWS), so this stub
answers only what a client sends before it is logged in: ApiVersions (v0-v3), SaslHandshake
(v0-v1) and SaslAuthenticate (v0-v1), per the Kafka protocol guide
(https://kafka.apache.org/protocol). Each SaslAuthenticate's bytes (the OAUTHBEARER client
first message, RFC 7628: `n,,\x01auth=Bearer <token>\x01\x01`) are appended to --out, one per
line, and the login is refused with SASL_AUTHENTICATION_FAILED (58) and a message, so the
client stops the way it stops on a real refused login.

Usage: sasl_capture_broker.py --port P --out FILE"""
import argparse
import socket
import struct
import threading

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 18, 17, 36, 3
ADVERTISED = [(API_VERSIONS, 0, 3), (SASL_HANDSHAKE, 0, 1), (SASL_AUTHENTICATE, 0, 1), (METADATA, 0, 4)]


def uvarint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def read_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def api_versions(version):
    if version >= 3:  # flexible: compact array, tagged fields
        body = struct.pack(">h", 0) + uvarint(len(ADVERTISED) + 1)
        for key, lo, hi in ADVERTISED:
            body += struct.pack(">hhh", key, lo, hi) + uvarint(0)
        return body + struct.pack(">i", 0) + uvarint(0)
    body = struct.pack(">hi", 0, len(ADVERTISED))
    for key, lo, hi in ADVERTISED:
        body += struct.pack(">hhh", key, lo, hi)
    if version >= 1:
        body += struct.pack(">i", 0)
    return body


def serve(conn, out, lock):
    try:
        while True:
            (size,) = struct.unpack(">i", read_exact(conn, 4))
            req = read_exact(conn, size)
            key, version, corr = struct.unpack(">hhi", req[:8])
            (client_len,) = struct.unpack(">h", req[8:10])
            rest = req[10 + max(client_len, 0):]
            if key == API_VERSIONS:
                body = api_versions(version)
            elif key == SASL_HANDSHAKE:
                mech = b"OAUTHBEARER"
                body = struct.pack(">hih", 0, 1, len(mech)) + mech
            elif key == SASL_AUTHENTICATE:
                (n,) = struct.unpack(">i", rest[:4])
                auth = rest[4:4 + n]
                with lock, open(out, "ab") as f:
                    f.write(auth.replace(b"\n", b" ") + b"\n")
                msg = b"stub broker: login recorded and refused"
                body = struct.pack(">hh", 58, len(msg)) + msg + struct.pack(">i", 0)
                if version >= 1:
                    body += struct.pack(">q", 0)
            else:
                return
            resp = struct.pack(">i", corr) + body
            conn.sendall(struct.pack(">i", len(resp)) + resp)
    except (EOFError, ConnectionError, struct.error):
        pass
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", a.port))
    srv.listen(16)
    lock = threading.Lock()
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, a.out, lock), daemon=True).start()


if __name__ == "__main__":
    main()
