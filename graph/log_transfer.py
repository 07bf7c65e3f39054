"""Who&When logs rewritten as another multi-agent system would write them: the transfer test.

:func:`rewrite_log` renames every speaker consistently to a name the original log does not
use, drops ``name`` and moves the speaker into ``role`` with Magentic-One style suffixes
(``Name (thought)`` when the speaker goes on, ``Name (-> Next)`` when it hands over), prepends
the human's question as step 0 (``role: human``) and shifts ``mistake_step`` by one. A model
trained on the originals should score the same on the rewritten logs: nothing it reads may
depend on names, roles or a speaking order.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

from rrsi.errors import SchemaError
from rrsi.traces.loading import natural_key

__all__ = ["UNSEEN_NAMES", "rewrite_log", "rewrite_dir"]

UNSEEN_NAMES: tuple[str, ...] = (
    "Navigator",
    "Scribe",
    "Analyst",
    "Courier",
    "Sentinel",
    "Cartographer",
    "Librarian",
    "Mechanic",
    "Pilot",
    "Archivist",
    "Surveyor",
    "Operator",
)


def _names(speakers: Sequence[str], rng: random.Random) -> dict[str, str]:
    pool = [n for n in UNSEEN_NAMES if n not in speakers]
    rng.shuffle(pool)
    return {s: pool[k] if k < len(pool) else f"Member{k + 1}" for k, s in enumerate(speakers)}


def rewrite_log(data: dict, seed: int = 0) -> dict:
    """The log ``data`` (a parsed Who&When file with ``name`` on every message) rewritten.

    Raises:
        SchemaError: a message without a ``name`` (the log is already role-only).
    """
    history = data.get("history") or []
    for i, entry in enumerate(history):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise SchemaError(f"history.{i}.name: the transfer rewrite needs a named speaker on every message")
    speakers = list(dict.fromkeys(e["name"] for e in history))
    rename = _names(speakers, random.Random(f"{seed}:{len(history)}:{','.join(speakers)}"))
    out = [{"content": data.get("question") or "", "role": "human"}]
    for i, entry in enumerate(history):
        who = rename[entry["name"]]
        nxt = rename[history[i + 1]["name"]] if i + 1 < len(history) else None
        suffix = "" if nxt is None else " (thought)" if nxt == who else f" (-> {nxt})"
        out.append({"content": entry.get("content"), "role": who + suffix})
    rewritten = {k: v for k, v in data.items() if k != "history"}
    rewritten["history"] = out
    if "mistake_agent" in data:
        rewritten["mistake_agent"] = rename.get(data["mistake_agent"], data["mistake_agent"])
    if "mistake_step" in data:
        rewritten["mistake_step"] = str(int(data["mistake_step"]) + 1)
    return rewritten


def rewrite_dir(source: str | Path, target: str | Path, seed: int = 0) -> list[Path]:
    """Rewrite every ``*.json`` log of ``source`` into ``target`` (same file names); files that are
    not named-speaker logs are left out."""
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(Path(source).glob("*.json"), key=natural_key):
        try:
            rewritten = rewrite_log(json.loads(path.read_text(encoding="utf-8")), seed)
        except (SchemaError, ValueError, TypeError, AttributeError):
            continue
        (target / path.name).write_text(json.dumps(rewritten))
        written.append(target / path.name)
    return written
