"""``rrsi incidents show`` says which params could not move and why."""

from __future__ import annotations

from rrsi.cli.main import main
from rrsi.schema import HeldParam, Incident
from rrsi.store import Store


def test_incidents_show_names_a_param_that_could_not_move(tmp_path, capsys):
    path = tmp_path / "hub.sqlite"
    store = Store(str(path))
    reason = "at its lower bound 0: 'decrease' cannot move it"
    store.put_incident(
        Incident(
            incident_id="inc-held",
            trace_ids=["t1"],
            failing_agents=["tooler"],
            failing_steps=["s1"],
            held=[HeldParam(agent="tooler", param="max_retries", reason=reason)],
        )
    )
    store.close()
    assert main(["incidents", "show", "inc-held", "--store", str(path)]) == 0
    text = capsys.readouterr().out
    assert f"could not move tooler.max_retries: {reason}" in text
