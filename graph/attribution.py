"""Root-cause attribution with the GNN: batched scoring, checkpoints, and the hub's entry point.

:class:`AttributionModel` wraps an :class:`~rrsi.graph.gnn.AttributionGNN` with what it needs
at inference: whether it reads text (then an :class:`~rrsi.graph.embedding.Embedder`),
the error-type table it was trained with, and per-agent failure history supplied by the
caller. :func:`attribute_incident` scores each trace of an incident and combines the
per-trace attributions with :func:`rrsi.graph.baselines.combine`.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from rrsi.config import default_home
from rrsi.errors import SchemaError, UserError
from rrsi.graph.baselines import combine
from rrsi.graph.embedding import Embedder, default_embedder
from rrsi.graph.gnn import AttributionGNN, GNNConfig
from rrsi.graph.incident_graph import IncidentBatch, incident_batch
from rrsi.schema import Attribution, Trace

__all__ = [
    "AttributionModel",
    "attribute_incident",
    "default_model_path",
    "serving_model_path",
    "load_serving_model",
    "SHIPPED_MODEL",
    "CHECKPOINT_VERSION",
]

CHECKPOINT_VERSION = 1


class AttributionModel:
    """A trained attribution GNN ready to blame steps and agents.

    Args:
        gnn: the network.
        error_types: error code → error type, as seen in training (feeds the type features).
        name: recorded as ``Attribution.model``.
        embedder: used when the network reads text (default: the process-wide cached one).
    """

    def __init__(
        self,
        gnn: AttributionGNN,
        error_types: Mapping[str, str] | None = None,
        name: str = "gnn",
        embedder: Embedder | None = None,
    ) -> None:
        self.gnn = gnn.eval()
        self.error_types = dict(error_types or {})
        self.name = name
        self._embedder = embedder

    @property
    def embedder(self) -> Embedder | None:
        if not self.gnn.config.text:
            return None
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def batch(self, traces: Sequence[Trace], history: Mapping[str, float] | None = None) -> IncidentBatch:
        """The incident graphs of ``traces`` with this model's embedder and error types."""
        return incident_batch(traces, self.embedder, history, self.error_types)

    @torch.no_grad()
    def scores(self, batch: IncidentBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """``(step_blame [ΣS], agent_blame [ΣA])`` for a batch."""
        self.gnn.eval()
        return self.gnn.blame(batch.data)

    def attribute(
        self, traces: Sequence[Trace], history: Mapping[str, float] | None = None, batch_size: int = 1024
    ) -> list[Attribution]:
        """One :class:`Attribution` per trace, scored ``batch_size`` traces at a time.

        Blame covers the candidates: the failing steps and their agents, or every step and
        agent of a trace that reports no failure (a failed task without error codes).
        """
        out: list[Attribution] = []
        for start in range(0, len(traces), batch_size):
            batch = self.batch(traces[start : start + batch_size], history)
            step_blame, agent_blame = self.scores(batch)
            out.extend(self._unbatch(batch, step_blame, agent_blame))
        return out

    def _unbatch(self, batch: IncidentBatch, step_blame: torch.Tensor, agent_blame: torch.Tensor) -> list[Attribution]:
        data = batch.data
        s_cand, a_cand = data["step"].candidate.tolist(), data["agent"].candidate.tolist()
        s_val, a_val = step_blame.tolist(), agent_blame.tolist()
        out, s_at, a_at = [], 0, 0
        for steps, agents in zip(batch.step_ids, batch.agents):
            sb = {s: s_val[s_at + i] for i, s in enumerate(steps) if s_cand[s_at + i]}
            ab = {a: a_val[a_at + i] for i, a in enumerate(agents) if a_cand[a_at + i]}
            s_at, a_at = s_at + len(steps), a_at + len(agents)
            out.append(
                Attribution.model_construct(
                    agent_blame=ab,
                    step_blame=sb,
                    root_agent=max(ab, key=ab.get),
                    decisive_step=max(sb, key=sb.get),
                    model=self.name,
                )
            )
        return out

    def save(self, path: str | Path) -> Path:
        """Write config, weights and error types to ``path`` (a ``torch.save`` file)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(
            {
                "version": CHECKPOINT_VERSION,
                "config": self.gnn.config.to_dict(),
                "state_dict": self.gnn.state_dict(),
                "error_types": self.error_types,
                "name": self.name,
            },
            path,
        )
        return path

    @classmethod
    def load(cls, path: str | Path, embedder: Embedder | None = None) -> AttributionModel:
        """Read a checkpoint written by :meth:`save`.

        Raises:
            UserError: the file is missing, not a checkpoint, or of another version.
        """
        path = Path(path)
        try:
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
        except FileNotFoundError:
            raise UserError(
                f"model: no checkpoint at {path}; train one with `rrsi train-attribution --out {path}`"
            ) from None
        except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as exc:
            raise UserError(f"model: {path} is not an attribution checkpoint ({exc})") from None
        if not isinstance(ckpt, dict) or ckpt.get("version") != CHECKPOINT_VERSION:
            got = ckpt.get("version") if isinstance(ckpt, dict) else type(ckpt).__name__
            raise UserError(
                f"model: {path} has checkpoint version {got!r}; this code reads version {CHECKPOINT_VERSION}"
            )
        try:
            gnn = AttributionGNN(GNNConfig(**ckpt["config"]))
            gnn.load_state_dict(ckpt["state_dict"])
        except (TypeError, ValueError, RuntimeError, KeyError) as exc:
            raise UserError(f"model: {path}: config or weights do not fit the network ({exc})") from None
        return cls(gnn, ckpt.get("error_types"), ckpt.get("name", "gnn"), embedder)


def attribute_incident(
    traces: Sequence[Trace], model: AttributionModel, history: Mapping[str, float] | None = None
) -> tuple[Attribution, dict[str, Attribution]]:
    """Attribute one incident: per-trace attributions and their combination.

    Args:
        traces: the incident's traces (at least one).
        model: a trained :class:`AttributionModel`.
        history: agent → recent own failure rate
            (:func:`rrsi.graph.features.own_failure_rates`), where known.

    Returns:
        ``(incident attribution, {trace_id: attribution})``.
    """
    if not traces:
        raise SchemaError("traces: an incident needs at least one trace")
    per_trace = model.attribute(list(traces), history)
    return combine(per_trace, model.name), {t.trace_id: a for t, a in zip(traces, per_trace)}


SHIPPED_MODEL = Path(__file__).resolve().parent / "models" / "attribution.pt"


def default_model_path() -> Path:
    """``rrsi.config.default_home()/models/attribution.pt``: a default model the user trained,
    which the hub prefers to the shipped one (:data:`SHIPPED_MODEL`)."""
    return default_home() / "models" / "attribution.pt"


def serving_model_path(configured: str | Path | None = None) -> Path:
    """The checkpoint the hub serves: ``configured`` when given, else the user's default model
    (:func:`default_model_path`) when there is one, else the model shipped with the package."""
    if configured is not None:
        return Path(configured)
    path = default_model_path()
    return path if path.exists() else SHIPPED_MODEL


def load_serving_model(configured: str | Path | None = None) -> AttributionModel:
    """The model at :func:`serving_model_path`.

    Raises:
        UserError: a configured checkpoint is missing or unreadable.
    """
    return AttributionModel.load(serving_model_path(configured))
