r"""The failure-mode classifier: a faulty agent's features → a distribution over the 14 MAST modes.

Inputs are standardized with the training set's mean and deviation, ``z = (x − μ) / σ``; then

- ``linear``: :math:`p = \mathrm{softmax}(W z + b)` (multinomial logistic regression);
- ``mlp``: :math:`p = \mathrm{softmax}(W_2\,\mathrm{GELU}(W_1 z + b_1) + b_2)`, dropout on the hidden layer
  in training.

``inputs="embedding"`` reads only the first 384 features (the agent's own MiniLM embedding, the
cheap baseline); ``"all"`` reads every feature of :mod:`rrsi.graph.mode_features`. Training minimizes
the cross-entropy against the agent's labelled modes (an agent labelled with two modes has half its
mass on each) with AdamW over mini-batches; a share of the training examples is held out and the
epoch with the lowest held-out loss is kept. The trained classifier is plain numpy (inference needs
no torch) and saves to one ``.npz`` of float16 weights.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field

from rrsi.errors import SchemaError, UserError
from rrsi.graph.embedding import EMBED_DIM
from rrsi.graph.failure_modes import MODE_CODES
from rrsi.graph.mode_features import MODE_DIM
from rrsi.schema_base import _Model

__all__ = ["ModeClassifierConfig", "ModeClassifier", "fit_mode_classifier", "mode_targets"]


class ModeClassifierConfig(_Model):
    """How a failure-mode classifier is built and trained.

    Args:
        kind: ``linear`` (softmax regression) or ``mlp`` (one hidden layer).
        inputs: ``embedding`` (the agent's own MiniLM vector only) or ``all`` (every feature).
        hidden: hidden units of the ``mlp``.
        dropout: dropout on the hidden layer in training.
        epochs, lr, weight_decay, batch_size: AdamW over mini-batches.
        held_share: share of the training examples held out to choose the epoch.
        seed: seeds the split, the initialization and the batches.
    """

    kind: Literal["linear", "mlp"] = "mlp"
    inputs: Literal["embedding", "all"] = "all"
    hidden: int = Field(default=256, ge=1, le=4096)
    dropout: float = Field(default=0.3, ge=0.0, lt=1.0)
    epochs: int = Field(default=40, ge=1, le=1000)
    lr: float = Field(default=1e-3, gt=0.0, le=1.0)
    weight_decay: float = Field(default=1e-2, ge=0.0, le=10.0)
    batch_size: int = Field(default=256, ge=1, le=65536)
    held_share: float = Field(default=0.1, ge=0.0, lt=0.5)
    seed: int = 0

    @property
    def width(self) -> int:
        """How many leading features the classifier reads."""
        return EMBED_DIM if self.inputs == "embedding" else MODE_DIM


def mode_targets(modes: list[tuple[str, ...]]) -> np.ndarray:
    """``[n, 14]``: each example's labelled modes, equal mass on each."""
    y = np.zeros((len(modes), len(MODE_CODES)), dtype=np.float32)
    for k, labels in enumerate(modes):
        for code in labels:
            y[k, MODE_CODES.index(code)] = 1.0 / len(labels)
    return y


def _gelu(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


class ModeClassifier:
    """A trained classifier: standardization and layers as numpy arrays (see the module docstring).

    Shapes:
        :meth:`probabilities`: ``[n, MODE_DIM]`` → ``[n, 14]`` in :data:`~rrsi.graph.failure_modes.MODE_CODES` order.
    """

    def __init__(self, config: ModeClassifierConfig, center: np.ndarray, scale: np.ndarray, layers: list) -> None:
        self.config = config
        self.center, self.scale = center.astype(np.float32), scale.astype(np.float32)
        self.layers = [(w.astype(np.float32), b.astype(np.float32)) for w, b in layers]

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Unnormalized scores of each mode, ``[n, 14]``."""
        h = (np.asarray(x, dtype=np.float32)[:, : self.config.width] - self.center) / self.scale
        for k, (w, b) in enumerate(self.layers):
            h = h @ w.T + b
            if k < len(self.layers) - 1:
                h = _gelu(h)
        return h

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """``softmax`` of :meth:`logits`."""
        z = self.logits(x)
        z = np.exp(z - z.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)

    def save(self, path: str | Path, trained_on: str) -> Path:
        """Write the classifier (float16 weights) and a line on what it was trained on to ``path`` (``.npz``)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = {"center": self.center, "scale": self.scale}
        for k, (w, b) in enumerate(self.layers):
            arrays[f"w{k}"], arrays[f"b{k}"] = w.astype(np.float16), b.astype(np.float16)
        with open(path, "wb") as fh:
            np.savez_compressed(fh, config=self.config.model_dump_json(), trained_on=trained_on, **arrays)
        return path

    @classmethod
    def load(cls, path: str | Path) -> tuple[ModeClassifier, str]:
        """The classifier saved at ``path`` and what it was trained on.

        Raises:
            UserError: the file is missing or is not a saved failure-mode classifier.
        """
        try:
            with np.load(Path(path), allow_pickle=False) as data:
                config = ModeClassifierConfig.model_validate_json(str(data["config"]))
                n = sum(1 for k in data.files if k.startswith("w"))
                layers = [(data[f"w{k}"], data[f"b{k}"]) for k in range(n)]
                model = cls(config, data["center"], data["scale"], layers)
                return model, str(data["trained_on"])
        except (OSError, ValueError, KeyError, SchemaError) as exc:
            raise UserError(f"model: cannot load a failure-mode classifier from {path} ({exc})") from None


def _split(n: int, share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(seed).permutation(n)
    cut = int(round(share * n)) if n >= 20 else 0
    return np.sort(order[cut:]), np.sort(order[:cut])


def _network(config: ModeClassifierConfig):
    import torch

    out = len(MODE_CODES)
    if config.kind == "linear":
        return torch.nn.Sequential(torch.nn.Linear(config.width, out))
    return torch.nn.Sequential(
        torch.nn.Linear(config.width, config.hidden),
        torch.nn.GELU(),
        torch.nn.Dropout(config.dropout),
        torch.nn.Linear(config.hidden, out),
    )


def _train(net, x, y, held_x, held_y, config: ModeClassifierConfig) -> None:
    """AdamW over shuffled mini-batches; the state with the lowest held-out cross-entropy is kept."""
    import torch

    optimizer = torch.optim.AdamW(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    generator = torch.Generator().manual_seed(config.seed)
    loss = lambda logits, target: -(target * torch.log_softmax(logits, dim=1)).sum(dim=1).mean()
    best, best_state = float("inf"), None
    for _ in range(config.epochs):
        net.train()
        for batch in torch.randperm(len(x), generator=generator).split(config.batch_size):
            optimizer.zero_grad()
            loss(net(x[batch]), y[batch]).backward()
            optimizer.step()
        if len(held_x):
            net.eval()
            with torch.no_grad():
                value = float(loss(net(held_x), held_y))
            if value < best:
                best, best_state = value, copy.deepcopy(net.state_dict())
    if best_state is not None:
        net.load_state_dict(best_state)


def fit_mode_classifier(
    x: np.ndarray, modes: list[tuple[str, ...]], config: ModeClassifierConfig | None = None
) -> ModeClassifier:
    """Train a classifier on features ``x`` ``[n, MODE_DIM]`` and each example's modes (the module docstring).

    Raises:
        UserError: no example, or ``x`` and ``modes`` of different lengths.
    """
    import torch

    config = config or ModeClassifierConfig()
    if len(x) == 0 or len(x) != len(modes):
        raise UserError(f"examples: need one or more, as many features ({len(x)}) as labels ({len(modes)})")
    torch.manual_seed(config.seed)
    x = np.asarray(x, dtype=np.float32)[:, : config.width]
    train, held = _split(len(x), config.held_share, config.seed)
    center, scale = x[train].mean(axis=0), x[train].std(axis=0).clip(min=1e-3)
    z = torch.from_numpy((x - center) / scale)
    y = torch.from_numpy(mode_targets(modes))
    net = _network(config)
    _train(net, z[train], y[train], z[held], y[held], config)
    layers = [(m.weight.detach().numpy(), m.bias.detach().numpy()) for m in net if isinstance(m, torch.nn.Linear)]
    return ModeClassifier(config, center, scale, layers)
