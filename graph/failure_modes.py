"""The MAST failure modes a faulty agent is labelled with: 14 modes in 3 families.

The codes, names and descriptions are those of the AEGIS data set's ``taxonomy.json`` (kfq20/AEGIS,
MIT licence, copyright 2025 AEGIS Team), which follows the MAST taxonomy of multi-agent failures
(Cemri et al., 2025, "Why Do Multi-Agent LLM Systems Fail?"). A mode's family is the prefix of its
code (``FM-2.4`` → ``FM-2``). :func:`mode` is the one check that a code belongs to the taxonomy;
everything that names a mode (the classifier's classes, a reflection's finding) goes through it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rrsi.errors import SchemaError

__all__ = ["FailureMode", "FAMILIES", "MODES", "MODE_CODES", "FAMILY_CODES", "mode", "family_of"]


@dataclass(frozen=True)
class FailureMode:
    """One mode of the taxonomy: its code, family code, name and what it means."""

    code: str
    family: str
    name: str
    description: str


FAMILIES: dict[str, str] = {
    "FM-1": "Specification Issues",
    "FM-2": "Inter-Agent Misalignment",
    "FM-3": "Task Verification Failures",
}

_MODES: tuple[tuple[str, str, str], ...] = (
    ("FM-1.1", "Task specification deviation",
     "The agent deviates from the original task requirements or changes the intended objective."),
    ("FM-1.2", "Role specification deviation",
     "The agent behaves inconsistently with its assigned role, responsibility, or capability boundary."),
    ("FM-1.3", "Add redundant steps",
     "The agent introduces unnecessary steps that do not contribute to solving the task and may increase "
     "confusion or cost."),
    ("FM-1.4", "Remove conversation history",
     "The agent ignores, removes, or fails to preserve important prior conversation context."),
    ("FM-1.5", "Remove termination conditions",
     "The agent removes or ignores conditions that define when the task should stop."),
    ("FM-2.1", "Repeat handled tasks", "The agent repeats work that has already been completed by another agent."),
    ("FM-2.2", "Make request ambiguous",
     "The agent produces unclear or ambiguous requests that make it difficult for other agents to respond "
     "correctly."),
    ("FM-2.3", "Deviate from main goal", "The agent shifts the conversation away from the main task objective."),
    ("FM-2.4", "Hide important information",
     "The agent omits, withholds, or fails to share information that is necessary for other agents to perform "
     "the task."),
    ("FM-2.5", "Ignore other agents",
     "The agent fails to consider or respond to relevant information, suggestions, or corrections from other "
     "agents."),
    ("FM-2.6", "Inconsistent reasoning",
     "The agent provides reasoning that conflicts with previous reasoning, shared evidence, or the current task "
     "state."),
    ("FM-3.1", "Premature termination", "The agent stops the task before the required goal has been fully achieved."),
    ("FM-3.2", "Remove verification steps",
     "The agent skips or removes necessary checking, validation, or review steps."),
    ("FM-3.3", "Incorrect verification",
     "The agent performs verification incorrectly, leading to false confidence in an incomplete or wrong result."),
)  # fmt: skip

MODES: dict[str, FailureMode] = {code: FailureMode(code, code.split(".")[0], name, d) for code, name, d in _MODES}
MODE_CODES: tuple[str, ...] = tuple(MODES)
FAMILY_CODES: tuple[str, ...] = tuple(FAMILIES)


def mode(code: str) -> FailureMode:
    """The mode of ``code`` (``FM-1.1`` … ``FM-3.3``).

    Raises:
        SchemaError: ``code`` is not one of the 14 codes; the message lists them.
    """
    try:
        return MODES[code.strip().upper()]
    except KeyError:
        raise SchemaError(f"error_type: {code!r} is not a MAST failure mode; expected one of {MODE_CODES}") from None


def family_of(code: str) -> str:
    """The family code of a mode code (``FM-2.4`` → ``FM-2``).

    Raises:
        SchemaError: ``code`` is not one of the 14 codes.
    """
    return mode(code).family
