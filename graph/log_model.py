r"""The real-log attribution model: one softmax over the blameable steps of a log.

Each blameable step :math:`t` of log :math:`\ell` gets a score :math:`s_t = w^\top z_t` from its
standardized features :math:`z_t` (:data:`~rrsi.graph.log_features.LOG_FEATURES`, and
optionally the step's MiniLM vector projected on ``text_dims`` principal directions of the
training steps), and

.. math::
    P(t \mid \ell) = \frac{e^{s_t}}{\sum_{u \in B(\ell)} e^{s_u}}, \qquad
    \min_w \; -\sum_\ell \log P(t^*_\ell \mid \ell) + \lambda \lVert w \rVert^2

(a conditional logit, fitted by L-BFGS). :math:`B(\ell)` holds every blameable step whatever
the length of the history, so the model needs no fixed size and knows no names. The decisive
step is :math:`\arg\max_t P`; the blamed agent either holds the most probability mass
(``agent_rule="mass"``) or wrote the decisive step (``"top"``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field
from scipy.optimize import minimize

from rrsi.errors import UserError
from rrsi.graph.log_features import LOG_FEATURES, LogFeatures
from rrsi.schema import Attribution, StepRecord, Trace
from rrsi.schema_base import _Model, validate

__all__ = [
    "LogModelConfig",
    "LogAttributionModel",
    "StepEvidence",
    "fit_log_model",
    "fit_step_logit",
    "LOG_MODEL_VERSION",
]

LOG_MODEL_VERSION = 2  # 2: the config names its embedding; a version-1 file was read with the contextual one


class LogModelConfig(_Model):
    """Hyperparameters of the real-log model (chosen inside training folds by
    :func:`rrsi.graph.log_training.select_config`).

    Args:
        l2: ridge strength :math:`\\lambda` (> 0).
        text_dims: principal directions of the step embeddings fed to the model (0 = none).
        agent_rule: ``mass`` (agent with the most step probability) or ``top`` (author of the decisive step).
        embedding: how messages are embedded — ``static`` (MiniLM's word-piece vectors averaged,
            :mod:`rrsi.graph.static_embedding`; microseconds a message) or ``contextual`` (the MiniLM
            transformer, :mod:`rrsi.graph.embedding`; tens of milliseconds a message on two cores).
        max_tokens: word pieces read per message.
    """

    l2: float = Field(default=10.0, gt=0.0, le=1e4)
    text_dims: int = Field(default=0, ge=0, le=32)
    agent_rule: Literal["mass", "top"] = "mass"
    embedding: Literal["static", "contextual"] = "static"
    max_tokens: int = Field(default=256, ge=8, le=256)


@dataclass(frozen=True)
class StepEvidence:
    """One of the top steps: its id, probability and the features that pushed its score up most."""

    step_id: str
    probability: float
    drivers: list[tuple[str, float]]


class LogAttributionModel:
    """A fitted conditional logit over blameable steps.

    Shapes:
        weights: ``[F + text_dims]``; center, scale: ``[F + text_dims]``;
        text_mean: ``[384]``; text_basis: ``[384, text_dims]``.
    """

    def __init__(
        self,
        config: LogModelConfig,
        weights: np.ndarray,
        center: np.ndarray,
        scale: np.ndarray,
        text_mean: np.ndarray,
        text_basis: np.ndarray,
        trained_on: str = "",
    ) -> None:
        self.config = config
        self.weights, self.center, self.scale = weights, center, scale
        self.text_mean, self.text_basis = text_mean, text_basis
        self.trained_on = trained_on
        self.names = (*LOG_FEATURES, *(f"text_pc{k + 1}" for k in range(config.text_dims)))

    def design(self, feats: LogFeatures) -> np.ndarray:
        """``[m, F + text_dims]`` standardized inputs of one log."""
        return (_raw(feats, self.text_mean, self.text_basis) - self.center) / self.scale

    def probabilities(self, feats: LogFeatures) -> np.ndarray:
        """``[m]``: P(step is decisive) over the log's blameable steps."""
        s = self.design(feats) @ self.weights
        e = np.exp(s - s.max())
        return e / e.sum()

    def attribute(self, trace: Trace, feats: LogFeatures) -> tuple[Attribution, list[StepEvidence]]:
        """The attribution of one log and the evidence for its three most probable steps."""
        p = self.probabilities(feats)
        steps = [trace.steps[i] for i in feats.steps]
        mass: dict[str, float] = {}
        for step, q in zip(steps, p):
            mass[step.agent] = mass.get(step.agent, 0.0) + float(q)
        top = int(np.argmax(p))
        root = max(mass, key=mass.get) if self.config.agent_rule == "mass" else steps[top].agent
        attribution = Attribution.model_construct(
            agent_blame=mass,
            step_blame={s.step_id: float(q) for s, q in zip(steps, p)},
            root_agent=root,
            decisive_step=steps[top].step_id,
            model="log-model",
        )
        return attribution, self._evidence(feats, steps, p)

    def _evidence(self, feats: LogFeatures, steps: list[StepRecord], p: np.ndarray) -> list[StepEvidence]:
        contributions = self.design(feats) * self.weights
        out = []
        for k in np.argsort(-p, kind="stable")[:3]:
            order = np.argsort(-contributions[k], kind="stable")[:3]
            drivers = [(self.names[j], float(contributions[k, j])) for j in order if contributions[k, j] > 0]
            out.append(StepEvidence(steps[k].step_id, float(p[k]), drivers))
        return out

    def save(self, path: str | Path) -> Path:
        """Write the model as one ``.npz`` (arrays, and its config as JSON; no pickle)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"version": LOG_MODEL_VERSION, "config": self.config.model_dump(), "trained_on": self.trained_on}
        with open(path, "wb") as fh:
            np.savez(fh, meta=np.array(json.dumps(meta)), weights=self.weights, center=self.center, scale=self.scale,
                     text_mean=self.text_mean, text_basis=self.text_basis)  # fmt: skip
        return path

    @classmethod
    def load(cls, path: str | Path) -> LogAttributionModel:
        """Read a model written by :meth:`save`.

        Raises:
            UserError: missing file, not a real-log model, another version, or arrays that do not fit.
        """
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in ("weights", "center", "scale", "text_mean", "text_basis")}
                meta = json.loads(str(data["meta"]))
        except FileNotFoundError:
            raise UserError(f"model: no real-log model at {path}; train one with `rrsi train-attribution`") from None
        except (OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
            raise UserError(f"model: {path} is not a real-log attribution model ({exc})") from None
        version = meta.get("version")
        if version not in (1, LOG_MODEL_VERSION):
            raise UserError(f"model: {path} has version {version!r}; this code reads 1 and {LOG_MODEL_VERSION}")
        config = meta.get("config")
        if version == 1 and isinstance(config, dict):
            config = {"embedding": "contextual", "max_tokens": 128, **config}
        config = validate(LogModelConfig, config, where=f"{path.name}: config")
        if arrays["weights"].shape != (len(LOG_FEATURES) + config.text_dims,):
            raise UserError(f"model: {path}: weights do not fit {len(LOG_FEATURES)} features + {config.text_dims}")
        return cls(config, **arrays, trained_on=meta.get("trained_on", ""))


def _raw(feats: LogFeatures, text_mean: np.ndarray, text_basis: np.ndarray) -> np.ndarray:
    if text_basis.shape[1] == 0:
        return feats.x
    return np.hstack([feats.x, (feats.text - text_mean) @ text_basis])


def _text_basis(examples: Sequence[tuple[LogFeatures, int]], dims: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and the top ``dims`` principal directions of the training steps' embeddings."""
    text = np.vstack([f.text for f, _ in examples])
    mean = text.mean(0)
    if dims == 0:
        return mean, np.zeros((text.shape[1], 0))
    _, _, vt = np.linalg.svd(text - mean, full_matrices=False)
    return mean, vt[:dims].T


def _conditional_logit(rows: np.ndarray, starts: np.ndarray, chosen: np.ndarray, l2: float) -> np.ndarray:
    """Weights minimizing the penalized negative log-likelihood of the module docstring."""
    segment = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(rows))))
    picked = rows[chosen].sum(0)

    def objective(w: np.ndarray) -> tuple[float, np.ndarray]:
        s = rows @ w
        top = np.maximum.reduceat(s, starts)
        e = np.exp(s - top[segment])
        z = np.add.reduceat(e, starts)
        p = e / z[segment]
        loss = -(s[chosen] - top - np.log(z)).sum() + l2 * w @ w
        return float(loss), -(picked - p @ rows) + 2 * l2 * w

    return minimize(objective, np.zeros(rows.shape[1]), jac=True, method="L-BFGS-B").x


def fit_log_model(
    examples: Sequence[tuple[LogFeatures, int]], config: LogModelConfig | None = None, trained_on: str = ""
) -> LogAttributionModel:
    """Fit on ``(features, index of the decisive step among the blameable ones)`` pairs.

    Raises:
        UserError: no example, or a label outside its log's blameable steps.
    """
    config = config or LogModelConfig()
    if not examples:
        raise UserError("examples: the real-log model needs at least one labelled log")
    for n, (feats, label) in enumerate(examples):
        if not 0 <= label < len(feats.steps):
            raise UserError(f"examples.{n}: label {label} is outside the log's {len(feats.steps)} blameable steps")
    text_mean, text_basis = _text_basis(examples, config.text_dims)
    raw = [_raw(f, text_mean, text_basis) for f, _ in examples]
    weights, center, scale = fit_step_logit(raw, [label for _, label in examples], config.l2)
    return LogAttributionModel(config, weights, center, scale, text_mean, text_basis, trained_on)


def fit_step_logit(
    logs: Sequence[np.ndarray], labels: Sequence[int], l2: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The conditional logit of the module docstring on raw step rows (``[m, F]`` per log) and each log's
    decisive row: ``(weights, center, scale)``, the rows standardized by ``center`` and ``scale`` before
    the weights apply."""
    rows = np.vstack(logs)
    center, scale = rows.mean(0), rows.std(0) + 1e-6
    starts = np.cumsum([0] + [len(r) for r in logs[:-1]])
    chosen = starts + np.asarray(labels, dtype=int)
    return _conditional_logit((rows - center) / scale, starts, chosen, l2), center, scale
