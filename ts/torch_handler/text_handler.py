"""TextHandler: text cleaning, basic_english tokenisation and the ``source_vocab.pt`` vocabulary.

TorchServe uses torchtext for the tokenizer and vocabulary; tserve reimplements the tokenizer
and accepts a vocabulary saved as a dict {token: index} (or any object with ``get_stoi()``).
"""

from __future__ import annotations

import logging
import os
import re
import string
import unicodedata
from abc import ABC
from collections.abc import Iterator
from typing import Any

import torch

from ts.context import Context
from ts.torch_handler.base_handler import BaseHandler
from ts.torch_handler.contractions import CONTRACTION_MAP

logger = logging.getLogger(__name__)
CLEANUP_REGEX = re.compile("<.*?>")
CONTRACTIONS_PATTERN = re.compile(
    "({})".format("|".join(re.escape(k) for k in sorted(CONTRACTION_MAP, key=len, reverse=True))),
    flags=re.IGNORECASE | re.DOTALL)
_BASIC_ENGLISH = [(re.compile(p), r) for p, r in [
    (r"\'", " '  "), (r"\"", ""), (r"\.", " . "), (r"<br \/>", " "), (r",", " , "), (r"\(", " ( "),
    (r"\)", " ) "), (r"\!", " ! "), (r"\?", " ? "), (r"\;", " "), (r"\:", " "), (r"\s+", " ")]]


def basic_english_tokenize(line: str) -> list[str]:
    """torchtext's ``get_tokenizer("basic_english")``."""
    line = line.lower()
    for pattern, repl in _BASIC_ENGLISH:
        line = pattern.sub(repl, line)
    return line.split()


def ngrams_iterator(token_list: list[str], ngrams: int) -> Iterator[str]:
    """Tokens, then every n-gram up to ``ngrams`` joined by spaces (torchtext's order)."""
    yield from token_list
    for n in range(2, ngrams + 1):
        for i in range(len(token_list) - n + 1):
            yield " ".join(token_list[i:i + n])


class Vocab:
    """token -> index with an unknown-token fallback."""

    def __init__(self, stoi: dict[str, int]) -> None:
        self.stoi = stoi
        self.default_index = stoi.get("<unk>", 0)

    def __getitem__(self, token: str) -> int:
        return self.stoi.get(token, self.default_index)

    def __len__(self) -> int:
        return len(self.stoi)


def load_vocab(path: str) -> Vocab:
    obj = torch.load(path, weights_only=False)
    if isinstance(obj, dict):
        return Vocab(obj)
    if hasattr(obj, "get_stoi"):
        return Vocab(dict(obj.get_stoi()))
    raise TypeError(f"{os.path.basename(path)} holds {type(obj).__name__}; save the vocabulary "
                    "as a dict {token: index}")


class TextHandler(BaseHandler, ABC):
    source_vocab: Vocab | None = None

    def initialize(self, context: Context) -> None:
        super().initialize(context)
        self.initialize_preprocess(context)
        self.initialized = True

    def initialize_preprocess(self, context: Context) -> None:
        """Loads the vocabulary (all preprocess needs): also the preprocess-pool hook."""
        model_dir = context.system_properties.get("model_dir") or "."
        vocab_path = os.path.join(model_dir, "source_vocab.pt")
        if os.path.isfile(vocab_path):
            self.source_vocab = load_vocab(vocab_path)
        else:
            logger.warning("Missing the source_vocab.pt file in %s; tokens cannot be indexed", model_dir)
        self.tokenizer = basic_english_tokenize

    def _expand_contractions(self, text: str) -> str:
        def expand(match: re.Match[str]) -> str:
            found = match.group(0)
            return CONTRACTION_MAP.get(found.lower(), found)
        return CONTRACTIONS_PATTERN.sub(expand, text).replace("'", "")

    def _remove_accented_characters(self, text: str) -> str:
        return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("utf-8", "ignore")

    def _remove_html_tags(self, text: str) -> str:
        return re.sub(CLEANUP_REGEX, "", text)

    def _remove_puncutation(self, text: str) -> str:  # TorchServe's spelling
        return text.translate(str.maketrans("", "", string.punctuation))

    _remove_punctuation = _remove_puncutation

    def _tokenize(self, text: str) -> list[str]:
        return basic_english_tokenize(text)

    def get_word_token(self, input_tokens: list[str]) -> list[str]:
        return input_tokens

    def summarize_attributions(self, attributions: torch.Tensor) -> torch.Tensor:
        attributions = attributions.sum(dim=-1).squeeze(0)
        normalised: torch.Tensor = attributions / torch.norm(attributions)
        return normalised

    def _text_of(self, row: dict[str, Any]) -> str:
        text = row.get("data") or row.get("body")
        if isinstance(text, (bytes, bytearray)):
            text = text.decode("utf-8")
        if not isinstance(text, str):
            raise ValueError(f"text input must be a string, got {type(text).__name__}")
        return text
