"""The ``handler`` section of an LLM model's model-config.yaml: its keys with what each accepts,
the defaults, and where the Hugging Face folder is (``llm_handler`` and ``vllm_handler``)."""

from __future__ import annotations

import os
from typing import Any

from ts.handler_utils.distributed.config import KeySpec, ModelConfigError, boolean, dtype_name, positive_int, string

DEFAULT_MAX_NEW_TOKENS = 64
OPENAI_COMPLETIONS_MAX_TOKENS = 16  # OpenAI's documented default for completions' max_tokens
DEFAULT_MAX_TOKENS_PER_STEP = 512
DEFAULT_MAX_WAITING = 256

SETTINGS: dict[str, KeySpec] = {
    "model_path": KeySpec(string, "a Hugging Face model folder (absolute, or relative to the model dir)"),
    "max_batch_size": KeySpec(positive_int, "a positive integer (default: batchSize)"),
    "max_tokens_per_step": KeySpec(positive_int, "a positive integer, at least max_batch_size"),
    "max_waiting": KeySpec(positive_int, "a positive integer"),
    "max_new_tokens": KeySpec(positive_int, "a positive integer"),
    "max_context": KeySpec(positive_int, "a positive integer, at most the model's max_position_embeddings"),
    "chat_template": KeySpec(string, "a Jinja chat template string"),
    "dtype": KeySpec(lambda v: v == "auto" or dtype_name(v), "auto, float32, float16 or bfloat16"),
    "trust_remote_code": KeySpec(boolean, "true or false"),
    "fast_path": KeySpec(boolean, "true or false (default: the engine's fast forward when the model supports it)"),
    "engine_process": KeySpec(boolean, "true or false (default: true with continuousBatching on one rank: the "
                                       "engine steps in a process of its own while the worker streams the answers)"),
    "strict_fields": KeySpec(boolean, "true or false (default false: unknown OpenAI request fields are ignored "
                                      "with a warning)"),
    "ignore_vllm_fields": KeySpec(boolean, "true or false (default false: a vLLM request field tserve does not "
                                           "implement, e.g. use_beam_search, is refused naming it)"),
    # the paged KV cache (ts/llm/engine/paged, docs/llm.md); vLLM's names where vLLM has the knob
    "paged_kv_cache": KeySpec(boolean, "true or false (default: true on one CPU process where the engine's fast "
                                       "forward runs the model, else false: the rectangle batch cache)"),
    "kv_cache_blocks": KeySpec(positive_int, "a positive integer: blocks in the pool (default: max_batch_size "
                               "sequences of the whole context)"),
    "kv_cache_memory_fraction": KeySpec(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                                        and 0 < v <= 1, "a number in (0, 1]: the pool gets the blocks that fit in "
                                        "this share of the device's free memory after the model is loaded"),
    "block_size": KeySpec(positive_int, "a positive integer: tokens per KV block (default 16)"),
    "enable_prefix_caching": KeySpec(boolean, "true or false (default true with the paged KV cache)"),
}


def engine_limits(settings: dict[str, Any], batch_size: int) -> dict[str, Any]:
    """The engine's limits from the handler block (``batch_size``: the model's batchSize, the
    default for max_batch_size)."""
    max_batch = settings.get("max_batch_size", batch_size)
    return dict(max_batch_size=max_batch,
                max_tokens_per_step=settings.get("max_tokens_per_step", max(DEFAULT_MAX_TOKENS_PER_STEP, max_batch)),
                max_waiting=settings.get("max_waiting", DEFAULT_MAX_WAITING),
                max_context=settings.get("max_context"))


def find_model_dir(model_dir: str, model_path: str | None) -> str:
    """The Hugging Face folder: handler.model_path, the model dir itself, or its one subfolder
    holding a config.json."""
    if model_path:
        path = model_path if os.path.isabs(model_path) else os.path.join(model_dir, model_path)
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise ModelConfigError(f"handler.model_path: {path} has no config.json (a folder saved with "
                                   "save_pretrained)")
        return path
    if os.path.isfile(os.path.join(model_dir, "config.json")):
        return model_dir
    found = sorted(d for d in os.listdir(model_dir) if os.path.isfile(os.path.join(model_dir, d, "config.json")))
    if len(found) == 1:
        return os.path.join(model_dir, found[0])
    raise ModelConfigError(
        f"no Hugging Face model folder in {model_dir}: " + (f"several hold a config.json ({', '.join(found)})"
                                                            if found else "no config.json found")
        + "; archive the save_pretrained folder as an extra file or set handler.model_path")


def max_prompt_chars(tokenizer: Any, max_context: int) -> int | None:
    """The most characters a prompt that fits ``max_context`` tokens can have: no token spans
    more characters than its vocabulary entry (byte-level and SentencePiece entries have one
    character per byte or character, WordPiece's more); None when the vocabulary cannot say."""
    try:
        longest = max(len(token) for token in tokenizer.get_vocab())
    except (AttributeError, TypeError, ValueError):
        return None
    return max_context * max(longest, 1)
