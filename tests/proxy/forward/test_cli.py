"""``kafkad proxy`` and ``kafkad replay`` on the command line: refusals are one line and
exit 2 (1 for an unreadable recording); a recording prints as its timeline."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from kio.schema.join_group.v5.request import JoinGroupRequest
from kio.schema.metadata.v12.request import MetadataRequest

from proxy.cli import main
from proxy.forward.frames import answer_wait_s
from proxy.forward.record import Kind, Recorder
from tests.proxy.harness import encode_request
from wire.headers import peek_header


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--upstream", "nohost"], "--upstream"),
        (["--upstream", "127.0.0.1:9092", "--listen", "0.0.0.0:0"], "--advertise"),
        (["--upstream", "h:1", "--set", "kafkad.fault.injection=produce:explode"], "action"),
        (["--upstream", "h:1", "--set", "num.partitions=3"], "kafkad.fault.injection"),
        (["--upstream", "h:1", "--set", "ssl.keystore.location=k.pem"], "only with --tls"),
        (
            ["--upstream", "h:1", "--set", "upstream.ssl.truststore.location=ca"],
            "only with --upstream-tls",
        ),
        (["--upstream", "h:1", "--tls"], "no keystore"),
        (
            ["--upstream", "h:1", "--upstream-tls", "--set", "upstream.ssl.truststore.location=/x"],
            "no such file",
        ),
    ],
)
def test_bad_proxy_command_lines(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["proxy", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kafkad: ") and says in err and err.count("\n") == 1


def test_replay_prints_a_recording_and_refuses_other_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "one.kdrec"
    rec = Recorder(path, {"client": "c:1", "listener": "l:2", "upstream": "u:3", "node_id": 4})
    request = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    rec.add(Kind.REQUEST, encode_request(request, 5, "me")[4:])
    rec.note("fault injection: something")
    rec.close()
    other = tmp_path / "other.txt"
    other.write_text("hello")
    assert main(["replay", str(path), str(other)]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("one.kdrec: client c:1 via l:2 -> upstream u:3 (broker 4)")
    assert "-> Metadata v12 corr=5 client=me" in lines[1]
    assert lines[2].endswith("** fault injection: something")
    assert "not a kafkad recording" in err


def test_join_group_may_wait_for_its_rebalance() -> None:
    join = JoinGroupRequest(
        group_id="g",
        session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=400),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(),
    )
    frame = encode_request(join, 1)[4:]
    assert answer_wait_s(frame, peek_header(frame)) == 405.0
    meta = encode_request(
        MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        ),
        2,
    )[4:]
    assert answer_wait_s(meta, peek_header(meta)) == 0.0


def test_replay_into_a_pipe_closed_early_ends_quietly(tmp_path: Path) -> None:
    """`kafkad replay FILE | head -1`: no BrokenPipeError traceback, exit status 0."""
    import subprocess
    import sys

    path = tmp_path / "long.kdrec"
    rec = Recorder(path, {"client": "c:1", "listener": "l:2", "upstream": "u:3"})
    for i in range(20000):  # far more than a pipe buffer holds
        rec.note(f"note {i}")
    rec.close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "replay", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"long.kdrec: client c:1")
    proc.stdout.close()
    with proc.stderr:
        err = proc.stderr.read()
    assert proc.wait(30) == 0
    assert err == b""
