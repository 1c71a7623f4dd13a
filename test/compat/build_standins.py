"""Stand-ins for the weights TorchServe 0.12's tests load and the pytorch/serve snapshot lacks (Git
LFS objects) or downloads. Run by run_torchserve_tests.sh in the extracted snapshot:

    python build_standins.py WORK

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
"""

from __future__ import annotations

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


def main(argv: list[str]) -> int:
    work = Path(argv[1]).resolve()
    mnist_weights(work)
    stateful_weights(work)
    resnet18_weights(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
