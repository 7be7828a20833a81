"""Coverage-guided fuzzing of the request decoder, the batch validator and the record scanner
with atheris (records under valid CRCs: see ``fuzz_target.batch_around``).

    python -m tests.wire.fuzz_atheris [CORPUS_DIR] [libFuzzer flags, e.g. -runs=20000]

The target is ``tests/wire/fuzz_target.check`` (see there for what counts as a failure), the
coverage is that of ``wire/`` (instrumented at import). ``CORPUS_DIR`` (default
``.fuzz-corpus``) is seeded with the golden frames of ``tests/wire/frames`` and keeps what the
fuzzer finds, so a later run goes on from there. A crash leaves ``crash-<sha1>`` (the input)
in the working directory or under ``-artifact_prefix=``; turn it into a regression test in
``tests/wire/test_fuzz_golden.py`` and fix ``wire/``. ``make fuzz`` runs this for ten minutes;
``tests/wire/test_fuzz_atheris.py`` runs 20,000 inputs in CI.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

REPO = Path(__file__).resolve().parents[2]
FRAMES = Path(__file__).resolve().parent / "frames"

with atheris.instrument_imports(include=["wire"]):
    import wire.bounds
    import wire.codec
    import wire.record_check
    import wire.record_kernel
    import wire.records  # noqa: F401

from tests.wire.fuzz_target import check  # noqa: E402


def seed(corpus: Path) -> None:
    corpus.mkdir(parents=True, exist_ok=True)
    for hex_file in FRAMES.glob("*.hex"):
        frame = bytes.fromhex(hex_file.read_text())
        (corpus / f"golden-{hex_file.stem}").write_bytes(frame)
        if hex_file.stem.startswith("produce"):
            start = frame.find(b"\x00" * 8)  # the batch alone, for the validator
            (corpus / f"golden-batch-{hex_file.stem}").write_bytes(frame[start:])


def main() -> None:
    args = sys.argv[1:]
    dirs = [a for a in args if not a.startswith("-")]
    flags = [a for a in args if a.startswith("-")]
    corpus = Path(dirs[0]) if dirs else REPO / ".fuzz-corpus"
    seed(corpus)
    atheris.Setup([sys.argv[0], *flags, str(corpus)], check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
