"""Stand-ins for the weights TorchServe 0.12's tests load and the pytorch/serve snapshot lacks (Git
LFS objects) or downloads. Run by run_torchserve_tests.sh in the extracted snapshot:

    python build_standins.py WORK [STANDINS]

- examples/image_classifier/mnist/mnist_cnn.pt: the example's own `Net`, fitted to the digit
  images the tests send (examples/.../mnist/test_data/{0..9}.png and test/pytest/test_data/0.png)
  through the example handler's transform, so the tests that compare predicted digits check the
  serving path (decoding, handler, batching, answer) as with the real weights. It says nothing of
  accuracy on other images.
- examples/stateful/model_cnn.pt: the same `Net`, random (the stateful handler ignores its output).
- overlay/.cache/resnet18-f37072fd.pth: torchvision's resnet18, where TorchServe's `download_model`
  test helper looks before it downloads: a random backbone whose last layer is fitted to the two
  photos the micro-batching test sends (kitten.jpg → tiger_cat, dog.jpg → golden_retriever), so its
  label checks test that each answer in a mixed batch is its own request's.

With STANDINS (a folder, served by compat_mirror.py in place of pytorch.org):
- STANDINS/models/: every weights file ts_scripts/mar_config.json downloads (its marsgen builds them
  all before any test that starts a server, and stops at the first it cannot get): the resnet18
  above, and for the others the example's own architecture with constant weights (a few KB each,
  see constant_weights).
- STANDINS/mar_files/: mnist.mar and resnet-18.mar, built as ts_scripts/marsgen.py builds them, by
  the snapshot's own model archiver (the files some tests download from torchserve.pytorch.org).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch


def _digits(work: Path) -> tuple[torch.Tensor, torch.Tensor]:
    from PIL import Image
    from torchvision import transforms

    # examples/image_classifier/mnist/mnist_handler.py's transform
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    images = [(work / f"examples/image_classifier/mnist/test_data/{d}.png", d) for d in range(10)]
    images.append((work / "test/pytest/test_data/0.png", 0))
    x = torch.stack([transform(Image.open(p)) for p, _ in images])
    y = torch.tensor([d for _, d in images])
    return x, y


def mnist_weights(work: Path) -> None:
    sys.path.insert(0, str(work / "examples/image_classifier/mnist"))
    from mnist import Net

    torch.manual_seed(0)
    net = Net()
    x, y = _digits(work)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for _ in range(500):
        net.train()
        opt.zero_grad()
        torch.nn.functional.nll_loss(net(x), y).backward()
        opt.step()
        net.eval()
        with torch.no_grad():
            if torch.equal(net(x).argmax(1), y):
                break
    else:
        raise SystemExit("the MNIST stand-in did not fit the test digits")
    torch.save(net.state_dict(), work / "examples/image_classifier/mnist/mnist_cnn.pt")
    sys.path.pop(0)


def stateful_weights(work: Path) -> None:
    sys.path.insert(0, str(work / "examples/stateful"))
    from model import Net

    torch.manual_seed(0)
    torch.save(Net().state_dict(), work / "examples/stateful/model_cnn.pt")
    sys.path.pop(0)


def resnet18_weights(work: Path) -> None:
    from PIL import Image
    from torchvision import transforms
    from torchvision.models import resnet18
    from torchvision.models.resnet import ResNet18_Weights

    torch.manual_seed(0)
    net = resnet18().eval()
    # ts.torch_handler.image_classifier's transform; the two photos the micro-batching test sends
    transform = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
                                    transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    images = work / "examples/image_classifier/resnet_152_batch/images"
    x = torch.stack([transform(Image.open(images / n).convert("RGB")) for n in ("kitten.jpg", "dog.jpg")])
    y = torch.tensor([282, 207])   # ImageNet's tiger_cat and golden_retriever
    with torch.no_grad():
        features = torch.nn.Sequential(*list(net.children())[:-1])(x).flatten(1)
    # only the last layer is fitted (the random backbone's features of two photos differ enough)
    opt = torch.optim.Adam(net.fc.parameters(), lr=1e-2)
    for _ in range(500):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net.fc(features), y).backward()
        opt.step()
        with torch.no_grad():
            if torch.equal(net(x).argmax(1), y):
                break
    else:
        raise SystemExit("the resnet18 stand-in did not fit the test photos")
    cache = work / "overlay/.cache"
    cache.mkdir(parents=True, exist_ok=True)
    torch.save(net.state_dict(), cache / Path(ResNet18_Weights.DEFAULT.url).name)


# ts_scripts/mar_config.json's downloaded weights other than resnet18's, with the example whose
# model.py holds their architecture
CONSTANT = {
    "fasterrcnn_resnet50_fpn_coco-258fb6c6.pth": "object_detector/fast-rcnn/model.py",
    "alexnet-owt-7be5be79.pth": "image_classifier/alexnet/model.py",
    "densenet161-8d451a50.pth": "image_classifier/densenet_161/model.py",
    "resnet152-394f9c45.pth": "image_classifier/resnet_152_batch/model.py",
    "squeezenet1_1-b8a52dc0.pth": "image_classifier/squeezenet/model.py",
    "vgg16-397923af.pth": "image_classifier/vgg_16/model.py",
    "deeplabv3_resnet101_coco-586e9e4e.pth": "image_segmenter/deeplabv3/model.py",
    "fcn_resnet101_coco-7ecb50ca.pth": "image_segmenter/fcn/model.py",
    "maskrcnn_resnet50_fpn_coco-bf2d0c1e.pth": "object_detector/maskrcnn/model.py",
}


def _model_class(model_file: Path) -> type[torch.nn.Module]:
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"standin_{model_file.parent.name}", model_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(model_file.parent))   # siblings it imports (fcn.py, intermediate_layer_getter.py)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    own = [c for c in vars(module).values()
           if isinstance(c, type) and issubclass(c, torch.nn.Module) and c.__module__ == module.__name__]
    if len(own) != 1:
        raise SystemExit(f"{model_file}: expected one model class, found {own}")
    return own[0]


def constant_weights(work: Path, models: Path) -> None:
    """State dicts of the examples' own architectures whose every tensor is one constant expanded
    to its shape: a file of a few KB however large the model (torch.save keeps the one element),
    which load_state_dict copies into the full model. Predictions are meaningless; the tests that use
    these models check registration, scaling, snapshots and the API, not labels."""
    from unittest import mock

    for name, model_file in CONSTANT.items():
        # some constructors load pretrained backbone weights (a download): only the shapes are wanted
        with torch.device("meta"), mock.patch("torchvision.models._api.WeightsEnum.get_state_dict", return_value={}), \
                mock.patch("torch.hub.load_state_dict_from_url", return_value={}), \
                mock.patch("torch.nn.Module.load_state_dict", return_value=None):
            shapes = _model_class(work / "examples" / model_file)().state_dict()
        state = {}
        for key, t in shapes.items():
            value = 1.0 if key.endswith("running_var") else 0.0 if key.endswith(("running_mean", "num_batches_tracked")) else 0.01
            state[key] = torch.full((), value, dtype=t.dtype).expand(t.shape)
        torch.save(state, models / name)


def archives(work: Path, models: Path, out: Path) -> None:
    """mnist.mar and resnet-18.mar as ts_scripts/mar_config.json describes them."""
    example = work / "examples/image_classifier"
    specs = [("mnist", example / "mnist/mnist.py", example / "mnist/mnist_cnn.pt", example / "mnist/mnist_handler.py", None),
             ("resnet-18", example / "resnet_18/model.py", models / "resnet18-f37072fd.pth", "image_classifier",
              example / "index_to_name.json")]
    env = {**os.environ, "PYTHONPATH": str(work / "model-archiver")}
    for name, model_file, weights, handler, extra in specs:
        cmd = [sys.executable, "-m", "model_archiver.model_packaging", "--model-name", name, "--version", "1.0",
               "--model-file", str(model_file), "--serialized-file", str(weights), "--handler", str(handler),
               "--export-path", str(out), "--force"]
        if extra is not None:
            cmd += ["--extra-files", str(extra)]
        subprocess.run(cmd, check=True, env=env, cwd=work)


def main(argv: list[str]) -> int:
    work = Path(argv[1]).resolve()
    mnist_weights(work)
    stateful_weights(work)
    resnet18_weights(work)
    if len(argv) > 2:
        standins = Path(argv[2]).resolve()
        models, mars = standins / "models", standins / "mar_files"
        models.mkdir(parents=True, exist_ok=True)
        mars.mkdir(parents=True, exist_ok=True)
        shutil.copy(work / "overlay/.cache/resnet18-f37072fd.pth", models)
        constant_weights(work, models)
        archives(work, models, mars)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
