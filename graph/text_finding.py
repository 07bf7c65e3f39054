"""A reviewable finding for a blamed agent of a text log: its failure mode, where it starts, why, and
what to change — the reflection where the agent has no params to update.

:func:`text_finding` joins the classifier's :class:`~rrsi.graph.mode_prediction.ModePrediction`
with the log: the step is the one attribution blamed (else the agent's first blameable step), the
root cause and the correction are the sentences of :data:`TEMPLATES` for the mode, and the
evidence quotes the agent's own words at that step (its first :data:`QUOTE_CHARS` characters).
:class:`TextFinding` is validated on construction (the code a MAST mode, the family its family, the
confidence in ``[0, 1]``); :func:`text_finding` also checks that the step is one of the agent's.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from rrsi.errors import SchemaError
from rrsi.graph.failure_modes import MODE_CODES, family_of, mode
from rrsi.graph.mode_features import agent_steps
from rrsi.graph.mode_prediction import ModePrediction
from rrsi.schema import Trace
from rrsi.schema_base import _Model

__all__ = ["TextFinding", "TEMPLATES", "QUOTE_CHARS", "text_finding"]

QUOTE_CHARS = 240
TEMPLATES: dict[str, tuple[str, str]] = {
    "FM-1.1": ("{agent} departs from what the task asks.", "Restate the task's requirements and answer them as given."),
    "FM-1.2": ("{agent} acts outside its role.", "Keep to the role's responsibility and hand other work on."),
    "FM-1.3": ("{agent} adds steps that do not serve the task.", "Drop the steps that do not move the task forward."),
    "FM-1.4": ("{agent} loses what was said earlier.", "Carry the earlier messages' facts and decisions forward."),
    "FM-1.5": ("{agent} ignores when the task should stop.", "State the stopping condition and stop when it holds."),
    "FM-2.1": ("{agent} redoes work another agent finished.", "Build on the finished work instead of repeating it."),
    "FM-2.2": ("{agent} makes a request others cannot act on.", "Ask with the inputs, the goal and the expected form."),
    "FM-2.3": ("{agent} steers away from the main goal.", "Return to the main goal and answer it."),
    "FM-2.4": ("{agent} withholds what others need.", "Share the facts and results the next agents depend on."),
    "FM-2.5": ("{agent} disregards other agents' input.", "Answer the corrections and suggestions of the others."),
    "FM-2.6": ("{agent} reasons against earlier reasoning.", "Reconcile the reasoning with the shared evidence."),
    "FM-3.1": ("{agent} stops before the goal is reached.", "Finish every part of the goal before concluding."),
    "FM-3.2": ("{agent} skips the checks the result needs.", "Verify the result before passing it on."),
    "FM-3.3": ("{agent} verifies wrongly and trusts a bad result.", "Check against the task's own conditions."),
}


class TextFinding(_Model):
    """What went wrong with one agent of a text log, for review (no update).

    Args:
        agent: the blamed agent as the log spells it.
        mode: its MAST mode code; family: the mode's family code.
        step: index into the trace's steps where the failure starts.
        root_cause, correction: one sentence each.
        evidence: the agent's own words at ``step``, quoted.
        confidence: the classifier's probability of ``mode``.
    """

    agent: str = Field(min_length=1, max_length=256)
    mode: str
    family: str
    step: int = Field(ge=0)
    root_cause: str = Field(min_length=1, max_length=500)
    correction: str = Field(min_length=1, max_length=500)
    evidence: str = Field(max_length=QUOTE_CHARS + 2)
    confidence: float = Field(ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _mode_in_taxonomy(self) -> TextFinding:
        if self.mode not in MODE_CODES:
            raise ValueError(f"mode: {self.mode!r} is not a MAST failure mode; expected one of {MODE_CODES}")
        if self.family != family_of(self.mode):
            raise ValueError(f"family: {self.family!r} is not the family of {self.mode} ({family_of(self.mode)})")
        return self

    @property
    def mode_name(self) -> str:
        """The mode's name in the taxonomy."""
        return mode(self.mode).name


def text_finding(trace: Trace, prediction: ModePrediction, step: int | None = None, name: str = "") -> TextFinding:
    """The finding for ``prediction.agent`` in ``trace`` (the module docstring); ``name`` is the agent as the
    log spells it (default: the trace's name).

    Raises:
        SchemaError: the agent has no blameable step, or ``step`` is not one of its steps.
    """
    own = agent_steps(trace, prediction.agent)
    if not own:
        raise SchemaError(f"agent: {prediction.agent!r} has no blameable step in trace {trace.trace_id}")
    if step is not None and step not in own:
        raise SchemaError(f"step: {step} is not a step of {prediction.agent!r}; its steps are {own}")
    at = own[0] if step is None else step
    words = " ".join(trace.steps[at].scratchpad.split())
    quote = f'"{words[:QUOTE_CHARS]}"'
    cause, fix = TEMPLATES[prediction.code]
    shown = name or prediction.agent
    return TextFinding(
        agent=shown, mode=prediction.code, family=prediction.family, step=at,
        root_cause=cause.format(agent=shown), correction=fix, evidence=quote, confidence=prediction.probability,
    )  # fmt: skip
