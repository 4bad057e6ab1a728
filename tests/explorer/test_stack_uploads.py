"""Uploads bounded before they are read (issue 17 item 2), against a real daphne: a body just over
the limit, a lying Content-Length and a chunked body over the limit are answered 413 at once, and the
web server's resident memory stays flat while it drops the bytes."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx
import onnx
import pytest
from prism_stack import Stack

pytestmark = [pytest.mark.timeout(300)]

LIMIT = 1_000_000
FRAMING = 64 * 1024  # explorer.web.bounded.FRAMING: multipart boundaries around the file


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    with Stack.running(tmp_path_factory.mktemp("uploads"), workers=(), PRISM_MAX_UPLOAD_BYTES=str(LIMIT)) as s:
        yield s


def rss_kib(stack: Stack) -> int:
    status = Path(f"/proc/{stack.procs['web'].pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])


def raw_request(stack: Stack, head: str, body: bytes = b"", wait_s: float = 10.0) -> tuple[bytes, float]:
    """Send `head` and `body` on a plain socket and read what comes back within `wait_s` seconds:
    (the bytes, seconds from the send to the first byte of the answer)."""
    host, port = stack.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait_s) as sock:
        t0 = time.monotonic()
        sock.sendall(head.encode() + body)
        first = sock.recv(65536)
        took = time.monotonic() - t0
        rest = b""
        try:
            while chunk := sock.recv(65536):
                rest += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return first + rest, took


def test_a_body_just_over_the_limit_is_413_naming_the_limit(web):
    data = b"\0" * (LIMIT + FRAMING)  # with the multipart framing, just over
    r = httpx.post(f"{web.url}/api/models", files={"model": ("big.onnx", data)}, timeout=60)
    assert r.status_code == 413, r.text
    assert r.json()["error"].startswith("model file is too large (") and f"the limit is {LIMIT} bytes" in r.json()["error"]
    ok = httpx.post(f"{web.url}/api/models", files={"model": ("m.onnx", b"\xff" * (LIMIT - 10))},
                    timeout=60)
    assert ok.status_code == 400 and "onnx" in ok.json()["error"].lower()  # under the limit: read and judged


def test_a_lying_content_length_is_answered_at_once(web):
    head = ("POST /api/models HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=x\r\n"
            "Content-Length: 300000000\r\n\r\n")
    answer, took = raw_request(web, head, b"--x\r\n" + b"\0" * 1000)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"the limit is 1000000 bytes" in answer and took < 3, took
    print(f"\n413 {took * 1000:.0f} ms after a request announcing 300 MB and sending 1 kB")


def test_a_chunked_body_over_the_limit_is_413(web):
    chunk = b"\0" * 65536
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(20)) + b"0\r\n\r\n"  # 1.3 MB
    head = ("POST /api/models HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=x\r\n"
            "Transfer-Encoding: chunked\r\n\r\n")
    answer, _ = raw_request(web, head, body)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]


def test_memory_stays_flat_while_big_bodies_are_refused(web):
    before = rss_kib(web)
    big = b"\0" * (64 << 20)
    for _ in range(3):  # 192 MB announced and sent, each dropped as it arrives
        head = ("POST /api/models HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; "
                f"boundary=x\r\nContent-Length: {len(big)}\r\n\r\n")
        try:
            raw_request(web, head, big, wait_s=20)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed after the linger time while we were still sending: the answer was out
    after = rss_kib(web)
    print(f"\nweb server resident memory {before / 1024:.0f} MiB -> {after / 1024:.0f} MiB after 3 x 64 MiB refused")
    assert after - before < 32 * 1024, (before, after)


def test_an_upload_under_the_limit_still_works(web, tmp_path):
    from onnx import TensorProto, helper

    m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                                            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]),
                          opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "relu.onnx"
    onnx.save(m, path)
    assert web.upload(path)["inputs"][0]["name"] == "x"
    body = (b"--x\r\nContent-Disposition: form-data; name=\"model\"; filename=\"relu.onnx\"\r\n"
            b"Content-Type: application/octet-stream\r\n\r\n" + path.read_bytes() + b"\r\n--x--\r\n")
    r = httpx.post(f"{web.url}/api/models", content=iter([body[:50], body[50:]]),  # chunked: no Content-Length
                   headers={"Content-Type": "multipart/form-data; boundary=x"}, timeout=60)
    assert r.status_code == 200 and r.json()["inputs"][0]["name"] == "x", r.text



def peak_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])


def test_an_accepted_body_is_not_held_in_memory(tmp_path_factory):
    """Under the limit, the body reaches Django from daphne's spool file (explorer.web.bounded), never
    queued whole in memory: 64 MiB of multipart (a file field the view does not want: Django's parser
    streams it to a temporary file, the view answers 400) leave the web server's peak where it was
    (it grew by the whole body before: daphne queued it at once)."""
    with Stack.running(tmp_path_factory.mktemp("accepted"), workers=()) as stack:
        pid = stack.procs["web"].pid
        before = peak_kib(pid)
        r = httpx.post(f"{stack.url}/api/models", files={"other": ("x.bin", b"\xff" * (64 << 20))}, timeout=120)
        grown = peak_kib(pid) - before
        forged = httpx.post(f"{stack.url}/api/models", files={"model": ("m.onnx", b"\xff" * 200_000)},
                            headers={"X-Prism-Spooled-Body": "0" * 32}, timeout=60)  # a client's token: ignored
    print(f"\nweb server peak +{grown / 1024:.0f} MiB for a 64 MiB request body")
    assert r.status_code == 400 and "multipart field 'model'" in r.json()["error"], r.text
    assert grown < 16 * 1024, grown
    assert forged.status_code == 400 and "onnx" in forged.json()["error"].lower(), forged.text


def test_an_accepted_model_is_parsed_outside_the_web_server(tmp_path_factory):
    """A valid 96 MiB model is read by a child process (explorer/compilations/services/reading.py):
    the web server's peak stays where it was (parsing it in process grew it by about twice the model);
    the same model under a small PRISM_INSPECT_MAX_ADDRESS_SPACE_BYTES is refused naming the limit, and
    the web server answers the next request."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    tmp = tmp_path_factory.mktemp("parsed")
    n = 24 << 20
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal(n, dtype=np.float32), "W")
    g = helper.make_graph([helper.make_node("Add", ["x", "W"], ["y"])], "big",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])], [w])
    path = tmp / "big.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    limit = 320 << 20
    for max_as, expect in ((None, 201), (limit, 400)):
        extra = {"PRISM_INSPECT_MAX_ADDRESS_SPACE_BYTES": str(max_as)} if max_as else {}
        with Stack.running(tmp / f"s{expect}", workers=(), **extra) as stack:
            pid = stack.procs["web"].pid
            before = peak_kib(pid)
            with path.open("rb") as f:
                r = httpx.post(f"{stack.url}/api/models", files={"model": ("big.onnx", f)}, timeout=120)
            grown = peak_kib(pid) - before
            assert r.status_code == expect, r.text
            assert httpx.get(f"{stack.url}/api/pipelines", timeout=30).status_code == 200
        print(f"\nweb server peak +{grown / 1024:.0f} MiB for a 96 MiB model ({r.status_code})")
        assert grown < 24 * 1024, grown
        if expect == 400:
            assert r.json()["error"] == (f"reading the model needs more memory than the limit of {limit} bytes "
                                         "(PRISM_INSPECT_MAX_ADDRESS_SPACE_BYTES)")
