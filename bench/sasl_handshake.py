"""Authentication handshake latency: connect to first authenticated request answered.

    .venv/bin/python -m bench.sasl_handshake [--runs 200]

Starts kafkad with a PLAINTEXT, a SASL_PLAINTEXT (PLAIN, SCRAM-SHA-512), an SSL and a
SASL_SSL (SCRAM-SHA-512) listener (certificates from ``kafkad certs``, a SCRAM user from
``kafkad add-scram``), then, ``--runs`` times per case, times a fresh connection from the TCP
connect (and TLS handshake) through ApiVersions, SaslHandshake v1 and the SaslAuthenticate
v2 exchange to an answered Metadata request, with a raw-protocol client (the SCRAM client is
``scramp``, the same library the broker uses). Reports p50/p99 per case; the plaintext and SSL
rows are the same path without SASL, so the differences are what authentication costs.
SCRAM's cost is mostly the client's 4,096 PBKDF2 iterations; the broker checks stored keys.
"""

from __future__ import annotations

import argparse
import hashlib
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import scramp.core
from scramp import ScramClient

from bench.brokers import free_port

REPO_DIR = Path(__file__).resolve().parent.parent
USER, PASSWORD = "alice", "alice-secret"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";'


def _pbkdf2(hf, password: bytes, salt: bytes, iterations: int) -> bytes:  # type: ignore[no-untyped-def]
    return hashlib.pbkdf2_hmac(hf().name, password, salt, iterations)


# scramp's client computes SCRAM's Hi() in a Python loop (~18 ms for 4,096 SHA-512 rounds);
# stock clients use OpenSSL's PBKDF2 (librdkafka) or the JDK's: so does this bench's client.
scramp.core.hi = _pbkdf2


def _frame(api_key: int, version: int, corr: int, body: bytes, flexible: bool) -> bytes:
    client = b"bench"
    header = struct.pack(">hhih", api_key, version, corr, len(client)) + client
    if flexible:
        header += b"\0"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _read(sock: socket.socket | ssl.SSLSocket) -> bytes:
    def exactly(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def _compact_bytes(b: bytes) -> bytes:
    n = len(b) + 1
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + b


def _auth_token(resp: bytes) -> bytes:
    # SaslAuthenticate v2 response: corr(4) tags(1) error(2) message(compact nullable) bytes...
    pos = 4 + 1
    (code,) = struct.unpack_from(">h", resp, pos)
    if code != 0:
        raise RuntimeError(f"SaslAuthenticate error {code}")
    pos += 2
    mlen, pos = resp[pos], pos + 1  # null message: 0
    pos += max(mlen - 1, 0)
    blen, shift, value = 0, 0, 0
    while True:
        byte = resp[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    blen = value - 1
    return resp[pos : pos + blen]


def one_login(port: int, mechanism: str | None, ctx: ssl.SSLContext | None) -> float:
    t0 = time.perf_counter()
    raw = socket.create_connection(("127.0.0.1", port))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Java clients do
    sock: socket.socket | ssl.SSLSocket = (
        ctx.wrap_socket(raw, server_hostname="localhost") if ctx is not None else raw
    )
    try:
        sock.sendall(_frame(18, 0, 1, b"", False))  # ApiVersions v0
        _read(sock)
        if mechanism is not None:
            sock.sendall(
                _frame(17, 1, 2, struct.pack(">h", len(mechanism)) + mechanism.encode(), False)
            )
            _read(sock)
            if mechanism == "PLAIN":
                tokens = [f"\0{USER}\0{PASSWORD}".encode()]
                for i, tok in enumerate(tokens):
                    sock.sendall(_frame(36, 2, 3 + i, _compact_bytes(tok) + b"\0", True))
                    _auth_token(_read(sock))
            else:
                client = ScramClient([mechanism], USER, PASSWORD)
                sock.sendall(
                    _frame(
                        36, 2, 3, _compact_bytes(client.get_client_first().encode()) + b"\0", True
                    )
                )
                client.set_server_first(_auth_token(_read(sock)).decode())
                sock.sendall(
                    _frame(
                        36, 2, 4, _compact_bytes(client.get_client_final().encode()) + b"\0", True
                    )
                )
                client.set_server_final(_auth_token(_read(sock)).decode())
        sock.sendall(_frame(3, 1, 9, struct.pack(">i", 0), False))  # Metadata v1, no topics
        _read(sock)
        return time.perf_counter() - t0
    finally:
        sock.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=200)
    args = p.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-sasl-"))
    py = sys.executable
    subprocess.run(
        [py, "-m", "proxy.cli", "certs", str(tmp / "certs")],
        check=True,
        cwd=REPO_DIR,
        capture_output=True,
    )
    subprocess.run(
        [
            py,
            "-m",
            "proxy.cli",
            "add-scram",
            "--data-dir",
            str(tmp / "data"),
            f"SCRAM-SHA-512=[name={USER},password={PASSWORD}]",
        ],
        check=True,
        cwd=REPO_DIR,
        capture_output=True,
    )
    ports = {name: free_port() for name in ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")}
    listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items())
    sets = {
        "listeners": listeners,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tmp / "certs" / "server.pem"),
    }
    cmd = [
        py,
        "-m",
        "proxy.cli",
        "serve",
        "--data-dir",
        str(tmp / "data"),
        "--log-level",
        "WARNING",
    ]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    log = open(tmp / "kafkad.log", "wb")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(cmd, cwd=REPO_DIR, stdout=subprocess.PIPE, stderr=log)
    log.close()
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith(b"kafkad ready"):
        proc.kill()
        err = (tmp / "kafkad.log").read_text()
        print(f"kafkad did not start: {line!r} {err}", file=sys.stderr)
        return 1
    ctx = ssl.create_default_context(cafile=str(tmp / "certs" / "ca.crt"))
    cases = [
        ("PLAINTEXT (no SASL)", ports["PLAINTEXT"], None, None),
        ("SASL_PLAINTEXT PLAIN", ports["SASL_PLAINTEXT"], "PLAIN", None),
        ("SASL_PLAINTEXT SCRAM-SHA-512", ports["SASL_PLAINTEXT"], "SCRAM-SHA-512", None),
        ("SSL (no SASL)", ports["SSL"], None, ctx),
        ("SASL_SSL SCRAM-SHA-512", ports["SASL_SSL"], "SCRAM-SHA-512", ctx),
    ]
    try:
        print(f"{'case':<30} {'p50 ms':>8} {'p99 ms':>8}   ({args.runs} logins each)")
        for name, port, mech, tls in cases:
            for _ in range(5):  # warm-up
                one_login(port, mech, tls)
            times = sorted(one_login(port, mech, tls) for _ in range(args.runs))
            p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
            print(f"{name:<30} {statistics.median(times) * 1000:>8.2f} {p99 * 1000:>8.2f}")
    finally:
        proc.terminate()
        proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
