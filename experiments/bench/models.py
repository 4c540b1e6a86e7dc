"""Real-shaped PyTorch models with recurrent layers, built in code (issue 15, item 7).

- ``lm1`` and ``lm16``: a word-level language model, ``Embedding(10000, 512)`` -> 2-layer
  ``nn.LSTM(512, 512)`` -> ``Linear(512, 10000)``, on token ids of shape (seq 64, batch 1
  or 16), time-major (PyTorch's default, and the only ONNX layout onnxruntime runs).
- ``tagger``: a sequence tagger, bidirectional 2-layer ``nn.GRU(300, 256)`` ->
  ``Linear(512, 20)``, on already embedded float input (seq 128, batch 1, 300).

Each forward returns the decoder's output only (logits or tag scores). Weights come from a
fixed seed, modules are in eval mode, inputs are seeded too. ``smoke=True`` gives the same
architectures at tiny sizes, for checking that a script runs end to end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


class LanguageModel(torch.nn.Module):
    """Embedding -> stacked LSTM -> linear decoder over the vocabulary."""

    def __init__(self, vocab: int, width: int, layers: int) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab, width)
        self.lstm = torch.nn.LSTM(width, width, num_layers=layers)
        self.decoder = torch.nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(self.embedding(tokens))
        return self.decoder(y)


class Tagger(torch.nn.Module):
    """Bidirectional stacked GRU -> linear layer over the tags."""

    def __init__(self, features: int, hidden: int, layers: int, tags: int) -> None:
        super().__init__()
        self.gru = torch.nn.GRU(features, hidden, num_layers=layers, bidirectional=True)
        self.out = torch.nn.Linear(2 * hidden, tags)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.gru(x)
        return self.out(y)


@dataclass(frozen=True)
class ModelCase:
    """A model and its input, with a one-line description of both."""

    name: str
    description: str
    module: torch.nn.Module
    input: torch.Tensor


def language_model(batch: int, smoke: bool = False, seed: int = 0) -> ModelCase:
    """The word-level LM (vocab 10000, width 512, 2 layers, seq 64; smoke: 50, 16, 2, 8)."""
    vocab, width, seq = (50, 16, 8) if smoke else (10000, 512, 64)
    torch.manual_seed(seed)
    module = LanguageModel(vocab, width, layers=2).eval()
    tokens = torch.randint(0, vocab, (seq, batch))
    desc = (
        f"Embedding({vocab}, {width}) -> nn.LSTM({width}, {width}, num_layers=2) -> "
        f"Linear({width}, {vocab}); int64 tokens (seq {seq}, batch {batch})"
    )
    return ModelCase(f"lm{batch}", desc, module, tokens)


def tagger(smoke: bool = False, seed: int = 0) -> ModelCase:
    """The GRU tagger (input 300, hidden 256, 20 tags, seq 128; smoke: 12, 8, 5, 8)."""
    features, hidden, tags, seq = (12, 8, 5, 8) if smoke else (300, 256, 20, 128)
    torch.manual_seed(seed)
    module = Tagger(features, hidden, layers=2, tags=tags).eval()
    x = torch.rand(seq, 1, features) * 2 - 1
    desc = (
        f"nn.GRU({features}, {hidden}, num_layers=2, bidirectional=True) -> "
        f"Linear({2 * hidden}, {tags}); float input in U(-1, 1) (seq {seq}, batch 1, {features})"
    )
    return ModelCase("tagger", desc, module, x)


#: The models by name: name -> builder taking ``smoke``.
MODELS: dict[str, Callable[[bool], ModelCase]] = {
    "lm1": lambda smoke: language_model(1, smoke),
    "lm16": lambda smoke: language_model(16, smoke),
    "tagger": tagger,
}
