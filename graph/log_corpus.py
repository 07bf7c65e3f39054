"""The training corpora of the log GNN loaded, labelled and featurized in one call.

:func:`load_corpus` reads AEGIS (a ``.jsonl[.gz]`` file or a folder of them) and Who&When
Algorithm-Generated (a folder of ``*.json``), turns each annotated log into a
:class:`~rrsi.graph.log_graph.LabelledLog` and a graph, and embeds every message once through a
:class:`~rrsi.graph.vector_cache.VectorCache` kept under ``RRSI_HOME`` (or ``cache``), so the next
run embeds nothing. ``limit`` keeps at most that many AEGIS logs per team shape (the first
ones), for quick runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rrsi.graph.log_gnn import LogGNNConfig
from rrsi.graph.log_gnn_training import featurize, from_aegis, from_whowhen, gnn_embedder
from rrsi.graph.log_graph import LabelledLog, LogData
from rrsi.graph.vector_cache import VectorCache, default_vector_cache_path
from rrsi.traces.aegis import load_aegis_dir
from rrsi.traces.loading import LoadError
from rrsi.traces.whowhen import WhoWhenLog, load_whowhen_dir

__all__ = ["Corpus", "load_corpus"]


@dataclass
class Corpus:
    """AEGIS and Who&When logs with their graphs, the vector cache, and what did not load."""

    aegis: list[LabelledLog]
    aegis_graphs: list[LogData]
    whowhen: list[WhoWhenLog]
    whowhen_graphs: list[LogData]
    vectors: VectorCache
    skipped: list[LoadError]

    @property
    def labelled(self) -> list[LabelledLog]:
        """Every labelled log, AEGIS first."""
        return [*self.aegis, *(from_whowhen(log) for log in self.whowhen)]

    @property
    def graphs(self) -> list[LogData]:
        """The graphs of :attr:`labelled`, in its order."""
        return [*self.aegis_graphs, *self.whowhen_graphs]


def _per_group(logs: list[LabelledLog], limit: int | None) -> list[LabelledLog]:
    if limit is None:
        return logs
    seen: Counter[str] = Counter()
    kept = []
    for log in logs:
        seen[log.group] += 1
        if seen[log.group] <= limit:
            kept.append(log)
    return kept


def load_corpus(
    aegis: str | Path | None,
    whowhen: str | Path | None,
    config: LogGNNConfig | None = None,
    cache: str | Path | None = None,
    limit: int | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> Corpus:
    """Load, label and featurize the corpora (either may be ``None``); see the module docstring.

    Raises:
        UserError: a path that is neither a file nor a folder.
    """
    config = config or LogGNNConfig()
    skipped: list[LoadError] = []
    aegis_logs: list[LabelledLog] = []
    if aegis is not None:
        loaded, errors = load_aegis_dir(aegis)
        skipped += errors
        aegis_logs = _per_group([from_aegis(log) for log in loaded if log.labels and log.labels.faulty], limit)
    whowhen_logs: list[WhoWhenLog] = []
    if whowhen is not None:
        loaded, errors = load_whowhen_dir(whowhen)
        skipped += errors
        whowhen_logs = [log for log in loaded if log.labels is not None]
    name = f"{config.embedding}-{config.max_tokens}"
    vectors = VectorCache(gnn_embedder(config), cache or default_vector_cache_path(name))
    graphs = featurize([*aegis_logs, *(from_whowhen(log) for log in whowhen_logs)], vectors, on_batch)
    vectors.save()
    n = len(aegis_logs)
    return Corpus(aegis_logs, graphs[:n], whowhen_logs, graphs[n:], vectors, skipped)
