"""Nesting-depth fuzzing of the worker's request JSON decoding with atheris (issue 27).

    python test/fuzz/fuzz_nesting.py -runs=3000 -seed=1          # what `make test` runs
    python test/fuzz/fuzz_nesting.py -max_total_time=600          # a longer run, on demand

Run from the repository root with ``PYTHONPATH=$PWD``. Each input is turned into a JSON body nested
0 to 20 000 levels deep (arrays, objects or both, closed or cut short, with the input's own bytes
inside and after it) and goes where the worker decodes request JSON: the body decoding of every
prediction (``ts.service.decode_batch``, beside a normal request of the same batch) and the
KServe envelopes (``request_body``). What must hold, else the input is reported as a crash:

* body decoding never raises: a body it cannot decode reaches the handler as the bytes sent, and
  the other request of the batch is decoded as usual;
* an envelope raises nothing but ``PredictionException`` with status 400.

The LLM handler's decoding (``ts.llm.api.fields.load_body``) imports torch; test/unit/test_deep_json.py
covers it.
"""

from __future__ import annotations

import logging
import sys

import atheris

with atheris.instrument_imports():
    from ts.protocol.codec import Part, Request
    from ts.service import decode_batch
    from ts.torch_handler.request_envelope.base import request_body
    from ts.utils.util import PredictionException

MAX_DEPTH = 20_000
OPENERS = (b"[", b'{"k":', b'{"":[', b"[1,")
CLOSERS = {b"[": b"]", b'{"k":': b"}", b'{"":[': b"]}", b"[1,": b"]"}
NORMAL = b'{"ok": [1, {"two": 2}]}'


def nested(fdp: atheris.FuzzedDataProvider) -> bytes:
    depth = fdp.ConsumeIntInRange(0, MAX_DEPTH)
    kinds = fdp.ConsumeBytes(16) or b"\0"
    opened = [OPENERS[kinds[i % len(kinds)] % len(OPENERS)] for i in range(depth)]
    middle = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 64)) if fdp.ConsumeBool() else b"0"
    closed = depth if fdp.ConsumeBool() else fdp.ConsumeIntInRange(0, depth)  # cut short, or whole
    tail = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 32))
    return b"".join(opened) + middle + b"".join(CLOSERS[o] for o in reversed(opened[:closed])) + tail


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    content_type = "application/json; charset=utf-8" if fdp.ConsumeBool() else "application/json"
    body = nested(fdp)
    batch = [Request("deep", [], [Part("body", content_type, body)]),
             Request("normal", [], [Part("body", "application/json", NORMAL)])]
    decoded, ids, _ = decode_batch(batch, decode=True)
    if decoded[1] != {"body": {"ok": [1, {"two": 2}]}} or ids != {0: "deep", 1: "normal"}:
        raise AssertionError(f"the normal request of the batch was decoded as {decoded[1]!r}")
    value = decoded[0]["body"]
    if isinstance(value, (bytes, bytearray)) and value != body:
        raise AssertionError("an undecodable body reached the handler changed")
    try:
        request_body({"body": body}, "kserve")
    except PredictionException as exc:
        if exc.error_code != 400:
            raise AssertionError(f"the envelope answered {exc.error_code} for a malformed body") from None


def main(argv: list[str]) -> None:
    logging.disable(logging.WARNING)  # "forwarding encoded payload", once per input
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
