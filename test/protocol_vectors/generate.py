"""Write the byte-exact protocol vectors: NAME.bin (one frame) + NAME.json (what it means).

Run from the repository root: ``python test/protocol_vectors/generate.py``. The json schema is
described in README.md beside this file; both codecs (Python and Java) are tested against it.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ts.generated.model_settings import ModelSettings  # noqa: E402
from ts.protocol import codec  # noqa: E402
from ts.protocol.codec import FrameType, Part, Request, Response  # noqa: E402

OUT = Path(__file__).resolve().parent


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def requests_json(requests: list[Request]) -> list[dict[str, Any]]:
    return [
        {
            "request_id": r.request_id,
            "headers": [[k, v] for k, v in r.headers],
            "parts": [
                {"name": p.name, "content_type": p.content_type, "value_b64": b64(p.value)}
                for p in r.parts
            ],
        }
        for r in requests
    ]


def responses_json(responses: list[Response]) -> list[dict[str, Any]]:
    return [
        {
            "request_id": r.request_id,
            "status": r.status,
            "message": r.message,
            "content_type": r.content_type,
            "headers": [[k, v] for k, v in r.headers],
            "body_b64": b64(r.body),
        }
        for r in responses
    ]


def vectors() -> dict[str, tuple[str, bytes, dict[str, Any]]]:
    """name -> (description, frame bytes, meaning)."""
    out: dict[str, tuple[str, bytes, dict[str, Any]]] = {}

    def json_vec(name: str, desc: str, ftype: FrameType, batch_id: int, obj: Any) -> None:
        out[name] = (desc, codec.encode_json_frame(ftype, batch_id, obj), {"json": obj})

    def empty_vec(name: str, desc: str, ftype: FrameType, batch_id: int) -> None:
        out[name] = (desc, codec.encode_frame(ftype, batch_id), {"body_b64": ""})

    def batch_vec(name: str, desc: str, batch_id: int, reqs: list[Request]) -> None:
        out[name] = (desc, codec.encode_inference(batch_id, reqs), {"requests": requests_json(reqs)})

    def resp_vec(name: str, desc: str, batch_id: int, resps: list[Response], chunk: bool) -> None:
        out[name] = (desc, codec.encode_result(batch_id, resps, chunk),
                     {"responses": responses_json(resps)})

    # every key the frontend sends, in its order (frontend LoadMessageTest checks the key list): the
    # worker's own fields, then the model's settings, taken from ts/generated/model_settings.py (the
    # frontend's ModelKeys), so a new key reaches this vector by re-running this script
    settings = dataclasses.asdict(ModelSettings(minWorkers=1, maxWorkers=2, batchSize=4, maxNumSequence=8,
                                                preprocessWorkers=2, maxBatchesInFlight=4))
    json_vec("load", "LOAD with every documented key", FrameType.LOAD, 1, {
        "modelName": "mnist", "modelVersion": "1.0", "modelPath": "/tmp/models/mnist",
        "handler": "mnist_handler.py:handle", "envelope": "", "gpuId": -1, "limitMaxImagePixels": True,
        "workerName": "W-9000-mnist_1.0",
        **{k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()},
    })
    json_vec("load_minimal", "LOAD with only the required keys (others take defaults)",
             FrameType.LOAD, 2, {"modelName": "m", "modelPath": "/srv/m", "handler": "image_classifier"})
    json_vec("loaded_ok", "LOADED success", FrameType.LOADED, 1,
             {"status": 200, "message": "loaded model mnist", "pid": 4242, "rank": 0, "worldSize": 1,
              "startup": {"importMs": 412.5, "loadMs": 230.0, "warm": True}})
    json_vec("loaded_error", "LOADED failure with non-ASCII error text", FrameType.LOADED, 1,
             {"status": 500, "message": "ModuleNotFoundError: No module named 'tokenizers' — install it"})
    json_vec("loaded_oom", "LOADED out of memory", FrameType.LOADED, 1,
             {"status": 507, "message": "CUDA out of memory. Tried to allocate 2.00 GiB"})
    empty_vec("ping", "PING (empty body)", FrameType.PING, 9)
    json_vec("pong", "PONG with stage metrics", FrameType.PONG, 9, {
        "status": "healthy", "pid": 4242, "rank": 0, "worldSize": 1, "inFlight": 1,
        "stages": {
            "preprocess": {"batches": 3, "busyMs": 12.5, "queueWaitMs": 0.25},
            "inference": {"batches": 3, "busyMs": 30.0, "queueWaitMs": 1.5, "idleFraction": 0.125},
            "postprocess": {"batches": 3, "busyMs": 2.0, "queueWaitMs": 0.0},
        },
    })
    empty_vec("stop", "STOP (empty body)", FrameType.STOP, 10)
    out["cancel"] = ("CANCEL: drop request s1 of batch 12 (its client went away)",
                     codec.encode_frame(FrameType.CANCEL, 12, b"s1"), {"text": "s1"})
    out["sequence_end"] = ("SEQUENCE_END: sequence ts-seq-1 closed (the handler may drop its state)",
                           codec.encode_frame(FrameType.SEQUENCE_END, 0, b"ts-seq-1"), {"text": "ts-seq-1"})
    json_vec("metrics", "METRICS after batch 7", FrameType.METRICS, 7, [
        {"name": "HandlerTime", "unit": "ms", "value": 12.34, "type": "gauge",
         "dimensions": {"ModelName": "mnist", "Level": "Model"}, "requestId": "a1"},
        {"name": "InferenceCount", "unit": "Count", "value": 2, "type": "counter",
         "dimensions": {"ModelName": "mnist", "Level": "Model", "Größe": "groß"}, "requestId": "a1,b2"},
    ])
    json_vec("error", "ERROR: frame could not be handled", FrameType.ERROR, 0,
             {"status": 400, "message": "unknown frame type 0x7F"})

    batch_vec("inference_two_requests", "INFERENCE with 2 requests: raw body, multipart", 7, [
        Request("a1", [("content-type", "application/json; charset=utf-8"),
                       ("url_path", "predictions/mnist"), ("explain", "False")],
                [Part("body", "application/json", '{"text":"héllo wörld ✓"}'.encode())]),
        Request("b2", [("content-type", "multipart/form-data; boundary=x"),
                       ("x-ünïcode", "värde €"), ("explain", "False")],
                [Part("data", "image/png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\xff"),
                 Part("caption", "", "naïve text ✓".encode())]),
    ])
    batch_vec("inference_empty_request", "INFERENCE: one request without headers/parts, "
              "then one with an empty body and empty content type", 8, [
                  Request("empty-1", [], []),
                  Request("empty-2", [("describe", "True")], [Part("body", "", b"")]),
              ])
    batch_vec("inference_empty_batch", "INFERENCE with zero requests", 11, [])

    resp_vec("result_mixed", "RESULT with mixed statuses, headers and a binary body", 7, [
        Response("a1", 200, "", "application/json", [("x-model", "mnist")], b'{"label":"7"}'),
        Response("b2", 422, "bad image: cannot identify image file", "", [], b""),
        Response("c3", 200, "OK", "application/octet-stream",
                 [("ts_stream_next", "false"), ("x-ünïcode", "värde")], bytes(range(256))),
    ], chunk=False)
    resp_vec("result_empty", "RESULT with zero responses", 11, [], chunk=False)
    resp_vec("chunk", "CHUNK: intermediate streaming piece for one request", 12, [
        Response("s1", 200, "", "text/plain", [("ts_stream_next", "true")], "tok ✓ ".encode()),
    ], chunk=True)
    return out


def main() -> None:
    for name, (desc, frame, meaning) in vectors().items():
        decoded = codec.decode_frame(frame)
        doc = {"name": name, "description": desc, "type": decoded.type.name,
               "type_code": int(decoded.type), "batch_id": decoded.batch_id,
               "length": len(frame) - 4, **meaning}
        (OUT / f"{name}.bin").write_bytes(frame)
        (OUT / f"{name}.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n",
                                          encoding="utf-8")
    print(f"wrote {len(vectors())} vectors to {OUT}")


if __name__ == "__main__":
    main()
