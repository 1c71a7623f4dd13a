"""JSON nested past Python's recursion limit, in every place the worker decodes a request (issue 27).

json.loads raises RecursionError there; it must become a per-request answer (the bytes passed
through, or a 400 naming the limit), never an exception that ends the worker.
"""

from __future__ import annotations

import pytest

from ts.context import Context, RequestProcessor
from ts.llm.api import fields
from ts.llm.params import LLMRequestError
from ts.model_loader import wrap_envelope
from ts.protocol.codec import Part, Request
from ts.service import decode_batch, decode_value
from ts.torch_handler.request_envelope.base import request_body
from ts.utils.util import PredictionException
from ts.warmstart import spawn

DEEP = b"[" * 1000 + b"]" * 1000
DEEP_OBJECT = b'{"a":' * 5000 + b"1" + b"}" * 5000


@pytest.mark.parametrize("body", [DEEP, DEEP_OBJECT])
def test_service_forwards_the_bytes_of_too_deep_json(body: bytes) -> None:
    assert decode_value("application/json", body, True) == body
    requests = [Request("r0", [], [Part("body", "application/json", body)]),
                Request("r1", [], [Part("body", "application/json", b'{"ok": true}')])]
    data, _, _ = decode_batch(requests, decode=True)
    assert data == [{"body": body}, {"body": {"ok": True}}]


@pytest.mark.parametrize("kind", [fields.TS, "chat"])
def test_llm_bodies_nested_too_deeply_are_400(kind: str) -> None:
    with pytest.raises(LLMRequestError, match="nested too deeply") as err:
        fields.load_body(DEEP, kind == fields.TS)
    assert err.value.status == 400


def test_envelope_bodies_nested_too_deeply_are_400() -> None:
    with pytest.raises(PredictionException, match="nested too deeply") as err:
        request_body({"body": DEEP_OBJECT}, "kserve")
    assert err.value.error_code == 400
    ctx = Context("m", "/m", {"model": {"modelName": "m", "modelVersion": "1.0"}}, 1, None, "x")
    ctx.set_batch({0: "r0"}, [RequestProcessor({})])
    with pytest.raises(PredictionException):
        wrap_envelope(lambda d, c: d, "kservev2")([{"body": DEEP}], ctx)


def test_envelope_bodies_that_are_not_utf8_are_400() -> None:
    with pytest.raises(PredictionException, match="UTF-8") as err:  # was UnicodeDecodeError: a 500
        request_body({"body": b'{"instances": "\xbf"}'}, "kserve")
    assert err.value.error_code == 400


def test_zygote_socket_folder_falls_back_to_tmp_when_tmpdir_is_long() -> None:
    assert spawn.socket_parent("/var/tmp") == "/var/tmp"
    assert spawn.socket_parent("/tmp/" + "d" * 100) == "/tmp"
