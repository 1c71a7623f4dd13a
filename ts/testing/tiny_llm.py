"""A tiny Llama and a local tokenizer, built without the hub: for tests, examples and benchmarks.

``build_tokenizer()`` trains a byte-level BPE on a short built-in text (deterministic, well under
a second) and wraps it in ``PreTrainedTokenizerFast`` with BOS/EOS/PAD and a chat template.
``build_model(tokenizer)`` makes a 2-layer ``LlamaForCausalLM`` from a config with seeded random
weights. Both can be saved with ``save_pretrained`` and loaded back with the ``Auto*`` classes.
"""

from __future__ import annotations

from typing import Any

CHAT_TEMPLATE = (  # tools, assistant tool calls and tool results rendered as plain text
    "{{ bos_token }}{% if tools %}<|system|>\ntools:{% for tool in tools %} {{ tool['function']['name'] }}"
    "{% endfor %}</s>\n{% endif %}{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{% if message['tool_call_id'] is defined %}[{{ message['tool_call_id'] }}] "
    "{% endif %}{{ message['content'] }}"
    "{% if message['tool_calls'] is defined %}{% for call in message['tool_calls'] %}"
    "<call>{{ call['function']['name'] }} {{ call['function']['arguments'] | tojson }}</call>{% endfor %}{% endif %}"
    "</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>"]

# Any text does: the byte-level alphabet covers every input, the merges only shorten encodings.
CORPUS = """\
The quick brown fox jumps over the lazy dog. A model server loads models and answers requests.
Language models generate text one token at a time; each new token depends on the ones before.
Continuous batching lets new requests join a running batch between decoding steps, so short
requests do not wait behind long ones. Streaming sends every token to the client as soon as it
is produced. The cache keeps the keys and values of earlier tokens, so that each step computes
attention for the newest token only. Hello world! How are you today? I am fine, thank you.
Once upon a time there was a little robot who loved to count: one, two, three, four, five, six,
seven, eight, nine, ten. It counted stars at night and raindrops in the morning. The end.
Numbers 0 1 2 3 4 5 6 7 8 9 and symbols + - * / = ( ) [ ] { } < > : ; , . ! ? " ' @ # $ % & _
Les modèles de langue écrivent du texte; Sprachmodelle schreiben Text; 言語モデルはテキストを書く。
"""


def build_tokenizer(vocab_size: int = 600, chat_template: str = CHAT_TEMPLATE) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` (ids 0-6 are SPECIAL_TOKENS, BOS is added)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS.splitlines(), trainer=trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    fast: Any = PreTrainedTokenizerFast  # untyped constructor
    return fast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
        unk_token="<unk>", chat_template=chat_template,
        additional_special_tokens=SPECIAL_TOKENS[4:])


def build_model(tokenizer: Any = None, *, seed: int = 0, vocab_size: int | None = None,
                hidden_size: int = 64, num_layers: int = 2, max_position_embeddings: int = 256,
                weight_scale: float = 0.2) -> Any:
    """A float32 ``LlamaForCausalLM`` with seeded random weights, in eval mode.

    ``weight_scale`` is the init std. With Hugging Face's default (0.02) a tiny random model has
    nearly flat logits, where a greedy argmax could be decided by float rounding, which differs
    between batch layouts; 0.2 spreads the logits well beyond rounding noise. (Exact equality with
    ``generate`` held at 0.02 too in trials; 0.2 is the safety margin the tests rely on.)
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if vocab_size is None:
        vocab_size = len(tokenizer) if tokenizer is not None else 600
    special = {}
    if tokenizer is not None:
        special = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
                   "pad_token_id": tokenizer.pad_token_id}
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=max_position_embeddings, initializer_range=weight_scale,
        tie_word_embeddings=False, **special)
    torch.manual_seed(seed)
    model: Any = LlamaForCausalLM(config)
    model = model.to(torch.float32)
    model.eval()
    return model
