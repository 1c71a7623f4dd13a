"""Write a small synthetic PNG (a red disc on a blue background) to send to the classifier."""

import sys

from PIL import Image, ImageDraw


def make_png(path: str, size: int = 64) -> None:
    image = Image.new("RGB", (size, size), (30, 60, 200))
    ImageDraw.Draw(image).ellipse((size // 4, size // 4, 3 * size // 4, 3 * size // 4), fill=(220, 40, 40))
    image.save(path, format="PNG")


if __name__ == "__main__":
    make_png(sys.argv[1] if len(sys.argv) > 1 else "image.png")
