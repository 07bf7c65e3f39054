"""Training targets: the segment values that make the answer's programs (:mod:`rrsi.hub.lm.template`)
write a given joint reflection, or the reason they cannot.

A reflection an agent with declared params gives in texts the template does not write is
rewritten as the template would write it for the same decision; anything the programs cannot
produce (an action on a param whose logs give no direction, an error type none of the agent's
params has, a root agent the root-agent choice may not name) raises ``ValueError`` naming the
field, and the example is left out of training.
"""

from __future__ import annotations

import json

from rrsi.hub.lm.template import (
    VERBS,
    AgentView,
    action_option,
    keep_reason,
    param_correction,
    param_root_cause,
    root_options,
    text_options,
)

__all__ = ["render_values"]


def _decisions(i: int, agent: AgentView, r: dict) -> str:
    """The action list ``r`` (the ``i``-th reflection) decides, checked against what ``agent`` may choose.

    Raises:
        ValueError: an action or error type outside the agent's options; names the field.
    """
    action = r.get("action")
    actions = action_option(action)
    if actions not in agent.action_options():
        raise ValueError(
            f"reflections[{i}].action: {agent.name} may act only on params whose logs give a direction "
            f"({list(agent.actionable or ())}; got {action[0]!r})"
        )
    if r["error_type"] not in agent.type_options():
        raise ValueError(
            f"reflections[{i}].error_type: must be one of {list(agent.type_options())} (got {r['error_type']!r})"
        )
    return actions


def _param_text_values(i: int, agent: AgentView, r: dict, actions: str) -> dict[str, str]:
    """The text values of an agent with declared params: its texts when the template writes them
    as they are; otherwise the ones it writes for the same decision. An action's texts are its own
    (with the domain term ``r``'s root cause starts with); a keep's name the param ``r``'s texts
    name (else the one with most failures) and the reason its evidence gives (a one-sided param
    kept reads as "point both ways": the agent's failures were not mostly its param's)."""
    causes, corrections = text_options(agent, actions)
    if r["root_cause"] in causes and r["correction"] in corrections:
        return {f"{i}.root_cause": r["root_cause"], f"{i}.correction": r["correction"]}
    term = next((t for t in sorted(agent.terms, key=len, reverse=True) if r["root_cause"].startswith(t)), None)
    term = term if term is not None else (agent.terms or ("",))[0]
    chosen = json.loads(actions)
    if chosen:
        param, op, why = chosen[0]["param"], chosen[0]["op"], ""
    else:
        text = r["root_cause"] + " " + r["correction"]
        named = [p for p in sorted(agent.params, key=len, reverse=True) if p in text]
        param = named[0] if named else (agent.readings[-1][0] if agent.readings else agent.params[0])
        op, why = None, keep_reason(dict(agent.readings).get(param, "few"))
    return {f"{i}.root_cause": param_root_cause(term, param, op, why), f"{i}.correction": param_correction(param, op)}


def _free_text_values(i: int, agent: AgentView, r: dict) -> dict[str, str]:
    """The text values of an agent without declared params: a domain term, then free text; an
    imperative verb, then free text.

    Raises:
        ValueError: a root cause without a domain term or a correction without a verb.
    """
    term = next((t for t in sorted(agent.terms or ("",), key=len, reverse=True) if r["root_cause"].startswith(t)), None)
    if term is None:
        raise ValueError(
            f"reflections[{i}].root_cause must start with one of {list(agent.terms)} (got {r['root_cause']!r})"
        )
    verb, _, rest = r["correction"].partition(" ")
    if verb not in VERBS:
        raise ValueError(f"reflections[{i}].correction must start with a capitalized imperative verb (got {verb!r})")
    return {
        f"{i}.term": term,
        f"{i}.root_cause": r["root_cause"][len(term) :],
        f"{i}.verb": verb,
        f"{i}.correction": (" " + rest) if rest else "",
    }


def render_values(
    agents: list[AgentView], root_agent: str, reflections: list[dict], attributed: str = ""
) -> dict[str, str]:
    """The segment values that make the programs produce ``reflections``.

    Args:
        agents: as for :func:`program`.
        root_agent: the incident's root agent (one of :func:`root_options`).
        reflections: one dict per agent (same order) with ``error_type``, ``action`` (``None`` or
            ``(param, op)``), ``root_cause`` and ``correction``: for an agent with declared params,
            texts the template writes, else they are rewritten as it would (see
            :func:`_param_text_values`); otherwise a root cause starting with one of the
            agent's terms and a correction starting with a verb of :data:`VERBS`.
        attributed: as for :func:`program`.

    Raises:
        ValueError: a value the programs cannot produce; the message names the field.
    """
    if root_agent not in (options := root_options(agents, attributed)):
        raise ValueError(
            f"root_agent: must be one of {list(options)}, the agents the evidence supports (got {root_agent!r})"
        )
    values = {"root_agent": root_agent}
    for i, (a, r) in enumerate(zip(agents, reflections, strict=True)):
        actions = _decisions(i, a, r)
        values.update({f"{i}.error_type": r["error_type"], f"{i}.actions": actions})
        values.update(_param_text_values(i, a, r, actions) if a.params else _free_text_values(i, a, r))
    return values
