"""BaseHandler loading paths and the default handlers on tiny random models (in process)."""

from __future__ import annotations

import io
import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from ts.model_loader import LoadError, LoadRequest, build_context, load_service, read_manifest, read_model_yaml, resolve_handler
from ts.model_settings import ModelSettings
from ts.protocol.codec import Part, Request
from ts.service import Service
from ts.utils.transforms import CenterCrop, Resize, ToTensor

torch.set_num_threads(1)

TINY_CNN = textwrap.dedent("""
    import torch
    from torch import nn

    class TinyCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 8, stride=8)
            self.fc = nn.Linear(4, 10)

        def forward(self, x):
            return self.fc(torch.relu(self.conv(x)).mean(dim=(2, 3)))
""")


def write_model_dir(root: Path, model: dict, files: dict[str, bytes | str], yaml_text: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "MAR-INF").mkdir(exist_ok=True)
    for name, content in files.items():
        mode = "wb" if isinstance(content, bytes) else "w"
        with open(root / name, mode) as f:
            f.write(content)
    model = {"modelName": root.name, "modelVersion": "1.0", **model}
    if yaml_text:
        (root / "model-config.yaml").write_text(yaml_text)
        model["configFile"] = "model-config.yaml"
    (root / "MAR-INF" / "MANIFEST.json").write_text(json.dumps({"model": model}))
    return root


def load(model_dir: Path, handler: str | None = None, envelope: str = "", batch_size: int = 4) -> Service:
    manifest = read_manifest(str(model_dir))
    req = LoadRequest(model_name=model_dir.name, model_path=str(model_dir),
                      handler=handler or manifest["model"]["handler"], envelope=envelope,
                      settings=ModelSettings(batchSize=batch_size))
    ctx = build_context(req, manifest, read_model_yaml(str(model_dir), manifest), None, 0, 0, 1, "cpu")
    return load_service(req, ctx, resolve_handler(req.handler, str(model_dir)))


def png(w: int, h: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def image_request(rid: str, data: bytes, name: str = "body") -> Request:
    return Request(rid, [], [Part(name, "image/png", data)])


@pytest.fixture(autouse=True)
def _clean_sys_modules():
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name in ("tiny_cnn", "seg_model", "det_model", "text_model") or name.startswith("custom_"):
            del sys.modules[name]


def _tiny_cnn_module():
    ns: dict = {}
    exec(TINY_CNN, ns)
    torch.manual_seed(0)
    return ns["TinyCNN"]().eval()


def test_transforms_match_torchvision_semantics():
    img = Image.new("RGB", (400, 300), (255, 0, 0))
    resized = Resize(256)(img)
    assert resized.size == (341, 256)  # shorter side 256, aspect kept (int truncation)
    cropped = CenterCrop(224)(resized)
    assert cropped.size == (224, 224)
    t = ToTensor()(cropped)
    assert t.shape == (3, 224, 224) and t[0].max() == 1.0 and t[1].max() == 0.0


def test_image_classifier_torchscript_topk_with_labels(tmp_path):
    model = _tiny_cnn_module()
    buf = io.BytesIO()
    torch.jit.save(torch.jit.trace(model, torch.randn(1, 3, 224, 224)), buf)
    mapping = {str(i): f"class{i}" for i in range(10)}
    d = write_model_dir(tmp_path / "ic", {"handler": "image_classifier", "serializedFile": "m.pt"},
                        {"m.pt": buf.getvalue(), "index_to_name.json": json.dumps(mapping)})
    svc = load(d)
    out = svc.predict([image_request("a", png(300, 260)), image_request("b", png(64, 64, 1), "data")])
    assert [r.status for r in out] == [200, 200], out[0].message
    first = json.loads(out[0].body)
    assert len(first) == 5 and all(k.startswith("class") for k in first)
    assert list(first.values()) == sorted(first.values(), reverse=True)
    # the handler's numbers are the model's softmax on our own preprocessing
    tensor = svc.handler.image_processing(Image.open(io.BytesIO(png(300, 260))).convert("RGB"))
    expected = torch.softmax(model(tensor[None]), 1)[0]
    top = int(expected.argmax())
    assert first[f"class{top}"] == pytest.approx(float(expected[top]), rel=1e-5)


def test_image_classifier_eager_state_dict_and_base64_and_bad_image(tmp_path):
    model = _tiny_cnn_module()
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    d = write_model_dir(tmp_path / "eager", {"handler": "image_classifier", "serializedFile": "w.pth",
                                             "modelFile": "tiny_cnn.py"},
                        {"w.pth": buf.getvalue(), "tiny_cnn.py": TINY_CNN}, yaml_text="handler:\n  topk: 3\n")
    svc = load(d)
    import base64
    b64 = base64.b64encode(png(40, 40)).decode()
    out = svc.predict([Request("a", [], [Part("data", "text/plain", b64.encode())])])
    assert out[0].status == 200, out[0].message
    assert len(json.loads(out[0].body)) == 3
    bad = svc.predict([image_request("x", b"not an image")])
    assert bad[0].status == 500 and "request 0: cannot decode the image" in bad[0].message


def test_torch_export_pt2(tmp_path):
    model = _tiny_cnn_module()
    ep = torch.export.export(model, (torch.randn(1, 3, 224, 224),))
    torch.export.save(ep, str(tmp_path / "m.pt2"))
    d = write_model_dir(tmp_path / "exp", {"handler": "image_classifier", "serializedFile": "m.pt2"},
                        {"m.pt2": (tmp_path / "m.pt2").read_bytes()})
    out = load(d).predict([image_request("a", png(224, 224))])
    assert out[0].status == 200, out[0].message


def test_base_handler_defaults_and_missing_weights(tmp_path):
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 1)), buf)
    d = write_model_dir(tmp_path / "lin", {"handler": "base_handler", "serializedFile": "lin.pt"}, {"lin.pt": buf.getvalue()})
    svc = load(d)
    svc.handler.preprocess = lambda data: torch.tensor([row["body"] for row in data], dtype=torch.float32)
    out = svc.predict([Request("a", [], [Part("body", "application/json", b"[1.0, 2.0]")])])
    assert out[0].status == 200 and len(json.loads(out[0].body)) == 1
    d2 = write_model_dir(tmp_path / "none", {"handler": "base_handler"}, {})
    with pytest.raises(RuntimeError, match="No model weights could be loaded"):
        load(d2)


def test_explain_uses_integrated_gradients(tmp_path):
    buf = io.BytesIO()
    torch.jit.save(torch.jit.trace(_tiny_cnn_module(), torch.randn(1, 3, 224, 224)), buf)
    d = write_model_dir(tmp_path / "ex", {"handler": "image_classifier", "serializedFile": "m.pt"}, {"m.pt": buf.getvalue()})
    out = load(d).predict([Request("a", [("explain", "True")], [Part("data", "image/png", png(32, 32))])])
    assert out[0].status == 200, out[0].message
    assert np.asarray(json.loads(out[0].body)).shape == (3, 224, 224)  # one attribution map per request


def test_describe_returns_custom_metadata(tmp_path):
    d = write_model_dir(tmp_path / "desc", {"handler": "custom_desc.py"}, {"custom_desc.py": textwrap.dedent("""
        from ts.torch_handler.base_handler import BaseHandler
        class Desc(BaseHandler):
            def initialize(self, context):
                self.initialized = True
            def describe_handle(self):
                return {"labels": 3}
    """)})
    out = load(d).predict([Request("a", [("describe", "True")], [])])
    assert json.loads(out[0].body) == {"labels": 3}


SEG_MODEL = textwrap.dedent("""
    import torch
    from torch import nn
    class Seg(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 1)
        def forward(self, x):
            return {"out": self.conv(x), "aux": x}
""")

DET_MODEL = textwrap.dedent("""
    import torch
    from torch import nn
    class Det(nn.Module):
        def __init__(self):
            super().__init__()
            self.dummy = nn.Parameter(torch.zeros(1))
        def forward(self, images):
            return [{"boxes": torch.tensor([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 1.0, 1.0]]),
                     "labels": torch.tensor([1, 2]), "scores": torch.tensor([0.9, 0.2])} for _ in images]
""")


def test_image_segmenter_output_shape(tmp_path):
    d = write_model_dir(tmp_path / "seg", {"handler": "image_segmenter", "modelFile": "seg_model.py"},
                        {"seg_model.py": SEG_MODEL})
    out = load(d).predict([image_request("a", png(6, 5))])
    assert out[0].status == 200, out[0].message
    arr = np.asarray(json.loads(out[0].body))
    assert arr.shape == (5, 6, 2)
    assert set(np.unique(arr[..., 0])) <= {0.0, 1.0, 2.0} and (arr[..., 1] > 0.33).all()


def test_object_detector_threshold_and_labels(tmp_path):
    d = write_model_dir(tmp_path / "det", {"handler": "object_detector", "modelFile": "det_model.py"},
                        {"det_model.py": DET_MODEL, "index_to_name.json": json.dumps({"1": "cat", "2": "dog"})})
    out = load(d).predict([image_request("a", png(8, 8)), image_request("b", png(10, 6))])
    assert [r.status for r in out] == [200, 200], out[0].message
    assert json.loads(out[0].body) == [{"cat": [1.0, 2.0, 3.0, 4.0], "score": pytest.approx(0.9)}]


TEXT_MODEL = textwrap.dedent("""
    import torch
    from torch import nn
    class TextNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.EmbeddingBag(20, 8, mode="mean")
            self.fc = nn.Linear(8, 3)
        def forward(self, text, offsets):
            return self.fc(self.embedding(text, offsets))
""")


def test_text_classifier_with_dict_vocab(tmp_path):
    ns: dict = {}
    exec(TEXT_MODEL, ns)
    torch.manual_seed(0)
    net = ns["TextNet"]()
    wbuf, vbuf = io.BytesIO(), io.BytesIO()
    torch.save(net.state_dict(), wbuf)
    vocab = {"<unk>": 0, "good": 1, "movie": 2, "good movie": 3, "is": 4, "not": 5}
    torch.save(vocab, vbuf)
    d = write_model_dir(tmp_path / "txt", {"handler": "text_classifier", "serializedFile": "w.pth", "modelFile": "text_model.py"},
                        {"w.pth": wbuf.getvalue(), "text_model.py": TEXT_MODEL, "source_vocab.pt": vbuf.getvalue(),
                         "index_to_name.json": json.dumps({"0": "neg", "1": "neu", "2": "pos"})})
    svc = load(d, batch_size=1)
    out = svc.predict([Request("a", [], [Part("data", "text/plain", b"Good <b>movie</b>!")])])
    assert out[0].status == 200, out[0].message
    probs = json.loads(out[0].body)
    assert set(probs) == {"neg", "neu", "pos"} and sum(probs.values()) == pytest.approx(1.0)
    tokens = torch.tensor([1, 2, 3])
    expected = torch.softmax(net(tokens, torch.tensor([0])), 1)[0].detach()
    assert probs["pos"] == pytest.approx(float(expected[2]), rel=1e-5)


def test_single_class_module_and_bad_handler_shapes(tmp_path):
    d = write_model_dir(tmp_path / "two", {"handler": "custom_two.py"}, {"custom_two.py": "class A:\n    pass\nclass B:\n    pass\n"})
    with pytest.raises(LoadError, match="exactly one class"):
        load(d)
    d = write_model_dir(tmp_path / "fn", {"handler": "custom_fn.py:missing"}, {"custom_fn.py": "def handle(d, c):\n    return d\n"})
    with pytest.raises(LoadError, match="has no function 'missing'"):
        load(d)


def test_handler_import_error_is_not_hidden_by_builtin_fallback(tmp_path):
    d = write_model_dir(tmp_path / "imp", {"handler": "custom_imp.py"}, {"custom_imp.py": "import not_a_real_dependency_xyz\n"})
    with pytest.raises(ModuleNotFoundError, match="not_a_real_dependency_xyz"):
        load(d)


def test_helper_classes_beside_the_handler_class_are_allowed(tmp_path):
    src = textwrap.dedent("""
        class Helper:
            pass

        class H:
            def initialize(self, c):
                pass

            def handle(self, d, c):
                return ["ok"] * len(d)
    """)
    d = write_model_dir(tmp_path / "helper", {"handler": "custom_helper.py"}, {"custom_helper.py": src})
    assert load(d).predict([Request("a", [], [])])[0].body == b"ok"


def test_torch_profiler_when_enabled(tmp_path, monkeypatch):
    buf = io.BytesIO()
    torch.jit.save(torch.jit.trace(_tiny_cnn_module(), torch.randn(1, 3, 224, 224)), buf)
    d = write_model_dir(tmp_path / "prof", {"handler": "image_classifier", "serializedFile": "m.pt"}, {"m.pt": buf.getvalue()})
    svc = load(d)
    traces = []
    svc.handler.profiler_args = {"activities": [torch.profiler.ProfilerActivity.CPU], "on_trace_ready": traces.append}
    monkeypatch.setenv("ENABLE_TORCH_PROFILER", "true")
    out = svc.predict([image_request("a", png(32, 32))])
    assert out[0].status == 200, out[0].message
    names = {e.key for e in traces[0].key_averages()}
    assert {"preprocess", "inference", "postprocess"} <= names


def test_async_handle_coroutines_are_awaited(tmp_path):
    src = textwrap.dedent("""
        import asyncio

        STATE = {}

        async def handle(data, context):
            if data is None:
                await asyncio.sleep(0)
                STATE["ready"] = "init"
                return None
            await asyncio.sleep(0)
            return [f"{STATE['ready']}:{row['body']}" for row in data]
    """)
    d = write_model_dir(tmp_path / "async", {"handler": "custom_async.py"}, {"custom_async.py": src})
    out = load(d).predict([Request("a", [], [Part("body", "text/plain", b"x")])])
    assert out[0].body == b"init:x"


MNIST_LIKE = textwrap.dedent("""
    import torch
    from torch import nn

    class GrayNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 7, stride=7)
            self.fc = nn.Linear(4, 10)

        def forward(self, x):
            return self.fc(torch.relu(self.conv(x)).mean(dim=(2, 3)))
""")

GRAY_HANDLER = textwrap.dedent("""
    from ts.torch_handler.image_classifier import ImageClassifier
    from ts.utils.transforms import Compose, Normalize, ToTensor

    class GrayHandler(ImageClassifier):
        # TorchServe's MNIST example: the image goes to the transform as decoded (mode "L")
        image_processing = Compose([ToTensor(), Normalize((0.1307,), (0.3081,))])

        def postprocess(self, data):
            return data.argmax(1).tolist()
""")


def _png_of_mode(mode: str, size: int = 28) -> bytes:
    buf = io.BytesIO()
    Image.new(mode, (size, size)).save(buf, format="PNG")
    return buf.getvalue()


def test_grayscale_one_channel_model_gets_the_image_as_decoded(tmp_path):
    ns: dict = {}
    exec(MNIST_LIKE, ns)
    torch.manual_seed(0)
    buf = io.BytesIO()
    torch.save(ns["GrayNet"]().state_dict(), buf)
    d = write_model_dir(tmp_path / "custom_gray", {"handler": "custom_gray_handler.py", "serializedFile": "w.pt",
                                                   "modelFile": "custom_gray_net.py"},
                        {"w.pt": buf.getvalue(), "custom_gray_net.py": MNIST_LIKE,
                         "custom_gray_handler.py": GRAY_HANDLER})
    out = load(d).predict([image_request("a", _png_of_mode("L")), image_request("b", _png_of_mode("L"))])
    assert [r.status for r in out] == [200, 200], out[0].message
    assert 0 <= json.loads(out[0].body) < 10


@pytest.mark.parametrize("mode", ["L", "RGBA", "P"])
def test_builtin_image_classifier_still_takes_any_image_mode(tmp_path, mode):
    model = _tiny_cnn_module()
    buf = io.BytesIO()
    torch.jit.save(torch.jit.trace(model, torch.randn(1, 3, 224, 224)), buf)
    d = write_model_dir(tmp_path / "ic", {"handler": "image_classifier", "serializedFile": "m.pt"}, {"m.pt": buf.getvalue()})
    out = load(d).predict([image_request("a", _png_of_mode(mode, 64))])
    assert out[0].status == 200, out[0].message


def test_initialize_with_a_context_like_torchserves_mock_context(tmp_path):
    # TorchServe's MockContext (copied into handler unit tests) has manifest, system_properties,
    # metrics, explain and model_yaml_config, but no model_name
    from types import SimpleNamespace

    from ts.metrics.metrics_store import MetricsStore
    from ts.torch_handler.image_classifier import ImageClassifier

    torch.save(_tiny_cnn_module().state_dict(), tmp_path / "model.pt")
    (tmp_path / "tiny_cnn.py").write_text(TINY_CNN)
    ctx = SimpleNamespace(manifest={"model": {"serializedFile": "model.pt", "modelFile": "tiny_cnn.py"}},
                          system_properties={"model_dir": str(tmp_path)}, explain=False,
                          metrics=MetricsStore("r", "tiny"), model_yaml_config={})
    handler = ImageClassifier()
    handler.initialize(ctx)
    assert handler.initialized
    assert not handler._is_describe() and not handler._is_explain()


def test_compiling_logs_torchserves_wording(tmp_path, caplog):
    from ts.torch_handler.base_handler import BaseHandler

    handler = BaseHandler()
    handler.model = _tiny_cnn_module()
    handler.model_yaml_config = {"pt2": {"compile": {"enable": True, "backend": "eager", "mode": "default"}}}
    with caplog.at_level("INFO", logger="ts.torch_handler.base_handler"):
        handler._maybe_compile()
    assert "Compiled model with backend eager, mode default" in caplog.messages
