"""Calls a tserve server with the standard clients on their default options; run by the clients'
own venv (test/clients/requirements.txt) from test_standard_clients.py.

    python oip_calls.py triton HTTP_URL GRPC_TARGET      # tritonclient http and grpc
    python oip_calls.py kserve-v2 HTTP_URL GRPC_TARGET   # KServe's v2 REST and gRPC clients
    python oip_calls.py kserve-v1 HTTP_URL               # KServe's v1 REST client

(tritonclient.grpc and kserve register the same proto file: one process each.)

The served model `adder` (test_standard_clients.py's handler) answers, per input X, the outputs
X_OUT (numbers doubled, text upper-cased) and X_PLUS1 (numbers + 1) or X_KIND (the Python type
each BYTES element reached the handler as). Prints one JSON object: scenario → "ok" or what failed.
"""

from __future__ import annotations

import asyncio
import json
import sys
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

MODEL = "adder"
FP32 = np.arange(6, dtype=np.float32).reshape(2, 3)   # a batch of two rows
INT64 = np.array([[1, -2, 3_000_000_000]], dtype=np.int64)
TEXT = np.array([b"hello", "w\u00f6rld".encode()], dtype=np.object_)
results: dict[str, str] = {}


def check(name: str, fn: Callable[[], Any]) -> None:
    try:
        fn()
        results[name] = "ok"
    except Exception as exc:  # noqa: BLE001 - every failure is reported by name
        results[name] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"


def same(got: Any, want: Any) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and np.array_equal(got, want), f"got {got!r}, want {want!r}"


def same_text(got: Any, want: list[str]) -> None:
    """BYTES elements compared as text: clients give bytes for binary data and str for JSON."""
    texts = [x.decode() if isinstance(x, bytes) else x for x in np.asarray(got).flatten().tolist()]
    assert texts == want, f"got {texts!r}, want {want!r}"


def raises(fn: Callable[[], Any], *needles: str) -> str:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the client's own error type
        text = str(exc)
        for needle in needles:
            assert needle in text, f"{needle!r} not in {text!r}"
        return text
    raise AssertionError("no error raised")


# ------------------------------------------------------------------------------ tritonclient
def triton_http(url: str) -> None:
    import tritonclient.http as th

    c = th.InferenceServerClient(url=url.removeprefix("http://"))

    def health() -> None:
        assert c.is_server_live() and c.is_server_ready() and c.is_model_ready(MODEL)
        assert not c.is_model_ready("nosuch")
        meta = c.get_server_metadata()
        assert meta["name"] == "tserve" and meta["version"] and "binary_tensor_data" in meta["extensions"], meta
        model = c.get_model_metadata(MODEL)
        assert model["name"] == MODEL and model["versions"] == ["1.0"] and model["platform"], model

    def infer(dtype: str, arr: np.ndarray, binary: bool) -> Callable[[], None]:
        def run() -> None:
            x = th.InferInput("X", list(arr.shape), dtype)
            x.set_data_from_numpy(arr, binary_data=binary)
            outputs = None if binary else [th.InferRequestedOutput("X_OUT", binary_data=False)]
            r = c.infer(MODEL, [x], outputs=outputs)   # binary: the client's defaults (binary in and out)
            if dtype == "BYTES":
                same_text(r.as_numpy("X_OUT"), ["HELLO", "W\u00d6RLD"])
                if binary:
                    same_text(r.as_numpy("X_KIND"), ["str", "str"])
            else:
                same(r.as_numpy("X_OUT"), arr * 2)
                if binary:
                    same(r.as_numpy("X_PLUS1"), arr + 1)
                else:
                    assert r.as_numpy("X_PLUS1") is None, "an output not asked for came back"
        return run

    def outputs_selected() -> None:
        x = th.InferInput("X", list(FP32.shape), "FP32")
        x.set_data_from_numpy(FP32)
        r = c.infer(MODEL, [x], outputs=[th.InferRequestedOutput("X_PLUS1")])
        assert [o["name"] for o in r.get_response()["outputs"]] == ["X_PLUS1"], r.get_response()
        same(r.as_numpy("X_PLUS1"), FP32 + 1)

    def errors() -> None:
        x = th.InferInput("X", list(FP32.shape), "FP32")
        x.set_data_from_numpy(FP32)
        raises(lambda: c.infer("nosuch", [x]), "nosuch")
        raises(lambda: c.infer(MODEL, [x], outputs=[th.InferRequestedOutput("NOPE")]), "NOPE")

    check("triton_http_health_and_metadata", health)
    for dtype, arr in [("FP32", FP32), ("INT64", INT64), ("BYTES", TEXT)]:
        for binary in (True, False):
            check(f"triton_http_infer_{dtype}_{'binary' if binary else 'json'}", infer(dtype, arr, binary))
    def gzip_request() -> None:
        x = th.InferInput("X", list(FP32.shape), "FP32")
        x.set_data_from_numpy(FP32)
        r = c.infer(MODEL, [x], request_compression_algorithm="gzip")   # a gzip body of the binary extension
        same(r.as_numpy("X_OUT"), FP32 * 2)

    check("triton_http_gzip_request", gzip_request)
    check("triton_http_outputs_selected", outputs_selected)
    check("triton_http_errors", errors)


def triton_grpc(target: str) -> None:
    import tritonclient.grpc as tg

    c = tg.InferenceServerClient(url=target)

    def health() -> None:
        assert c.is_server_live() and c.is_server_ready() and c.is_model_ready(MODEL)
        assert c.get_server_metadata().name == "tserve"
        meta = c.get_model_metadata(MODEL)
        assert meta.name == MODEL and list(meta.versions) == ["1.0"], meta

    def infer(dtype: str, arr: np.ndarray) -> Callable[[], None]:
        def run() -> None:
            x = tg.InferInput("X", list(arr.shape), dtype)
            x.set_data_from_numpy(arr)
            r = c.infer(MODEL, [x])
            if dtype == "BYTES":
                same_text(r.as_numpy("X_OUT"), ["HELLO", "W\u00d6RLD"])
                same_text(r.as_numpy("X_KIND"), ["str", "str"])
            else:
                same(r.as_numpy("X_OUT"), arr * 2)
        return run

    def outputs_selected() -> None:
        x = tg.InferInput("X", list(FP32.shape), "FP32")
        x.set_data_from_numpy(FP32)
        r = c.infer(MODEL, [x], outputs=[tg.InferRequestedOutput("X_PLUS1")])
        assert [o.name for o in r.get_response().outputs] == ["X_PLUS1"]

    def errors() -> None:
        x = tg.InferInput("X", list(FP32.shape), "FP32")
        x.set_data_from_numpy(FP32)
        raises(lambda: c.infer("nosuch", [x]), "nosuch")

    check("triton_grpc_health_and_metadata", health)
    for dtype, arr in [("FP32", FP32), ("INT64", INT64), ("BYTES", TEXT)]:
        check(f"triton_grpc_infer_{dtype}", infer(dtype, arr))
    check("triton_grpc_outputs_selected", outputs_selected)
    check("triton_grpc_errors", errors)


# ------------------------------------------------------------------------------ KServe SDK
def kserve_v2(url: str, target: str) -> None:
    from kserve import InferenceGRPCClient, InferenceRESTClient, InferInput, InferRequest, RESTConfig

    def request(dtype: str, arr: np.ndarray) -> InferRequest:
        x = InferInput("X", list(arr.shape), dtype)
        x.set_data_from_numpy(arr)   # binary_data=True: the binary extension on REST
        return InferRequest(model_name=MODEL, infer_inputs=[x])

    async def rest() -> None:
        client = InferenceRESTClient(RESTConfig(protocol="v2"))
        assert await client.is_server_live(url) and await client.is_server_ready(url)
        assert await client.is_model_ready(url, MODEL)
        r = await client.infer(url, request("FP32", FP32), model_name=MODEL)
        out = {o.name: o.as_numpy() for o in r.outputs}
        same(out["X_OUT"], FP32 * 2)
        r = await client.infer(url, request("BYTES", TEXT), model_name=MODEL)
        out = {o.name: o.as_numpy() for o in r.outputs}
        same_text(out["X_KIND"], ["str", "str"])
        try:
            await client.infer(url, request("FP32", FP32), model_name="nosuch")
            raise AssertionError("no error for an unknown model")
        except Exception as exc:  # noqa: BLE001 - httpx.HTTPStatusError
            assert "nosuch" in str(exc) and "404" in str(exc), exc
        await client.close()

    async def grpc() -> None:
        client = InferenceGRPCClient(target, retries=0)
        assert await client.is_server_live() and await client.is_server_ready()
        assert await client.is_model_ready(MODEL)
        r = await client.infer(request("INT64", INT64))
        same({o.name: o.as_numpy() for o in r.outputs}["X_OUT"], INT64 * 2)
        r = await client.infer(request("BYTES", TEXT))
        same_text({o.name: o.as_numpy() for o in r.outputs}["X_KIND"], ["str", "str"])
        await client.close()

    check("kserve_v2_rest", lambda: asyncio.run(rest()))
    check("kserve_v2_grpc", lambda: asyncio.run(grpc()))


def kserve_v1(url: str) -> None:
    from kserve import InferenceRESTClient, RESTConfig

    async def run() -> None:
        client = InferenceRESTClient(RESTConfig(protocol="v1"))
        assert await client.is_server_live(url)
        assert await client.is_model_ready(url, MODEL)
        r = await client.infer(url, {"instances": [[1, 2], [3, 4, 5]]}, model_name=MODEL)
        assert r == {"predictions": [3, 12]}, r
        r = await client.explain(url, MODEL, {"instances": [[1, 1]]})
        assert r == {"explanations": [2]}, r
        try:
            await client.is_model_ready(url, "nosuch")
            raise AssertionError("no error for an unknown model")
        except Exception as exc:  # noqa: BLE001 - httpx.HTTPStatusError
            assert "404" in str(exc), exc
        await client.close()

    check("kserve_v1_rest", lambda: asyncio.run(run()))


def main(argv: list[str]) -> None:
    if argv[0] == "triton":
        triton_http(argv[1])
        triton_grpc(argv[2])
    elif argv[0] == "kserve-v2":
        kserve_v2(argv[1], argv[2])
    else:
        kserve_v1(argv[1])
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
