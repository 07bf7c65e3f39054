from __future__ import annotations

import copy

import ray
import yaml

from rrsi.cli.main import main
from tests.rrsi.test_scenario import BASE


def test_bad_scenario_exits_2_and_runs_nothing(tmp_path, capsys):
    data = copy.deepcopy(BASE)
    data["agents"][1]["depends_on"] = ["ghost"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["demo", "--scenario", str(path), "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert "agents.b.depends_on" in err and "ghost" in err
    assert not ray.is_initialized()
    assert not (tmp_path / "w").exists()


def test_the_hub_serves_the_shipped_attribution_gnn_until_the_user_trains_one(tmp_path, monkeypatch):
    from rrsi.graph.attribution import SHIPPED_MODEL, AttributionModel, default_model_path, serving_model_path

    monkeypatch.setenv("RRSI_HOME", str(tmp_path))
    assert serving_model_path() == SHIPPED_MODEL and not default_model_path().exists()  # nothing to train first
    assert AttributionModel.load(serving_model_path()).name == "gnn"
    default_model_path().parent.mkdir(parents=True)
    AttributionModel.load(SHIPPED_MODEL).save(default_model_path())
    assert serving_model_path() == default_model_path()  # the user's own default wins
    assert serving_model_path(tmp_path / "mine.pt") == tmp_path / "mine.pt"  # a configured one wins over both


def test_nonpositive_rounds_exit_2(capsys):
    assert main(["demo", "--rounds", "0"]) == 2
    assert "--rounds" in capsys.readouterr().err


def test_approve_needs_a_store_and_a_blocked_plan(tmp_path, capsys):
    assert main(["approve", "plan-x", "--store", str(tmp_path / "none.sqlite")]) == 2
    assert "no hub store" in capsys.readouterr().err
    from rrsi.hub.hub import ReflectionHub

    ReflectionHub(str(tmp_path / "hub.sqlite"))
    assert main(["approve", "plan-x", "--store", str(tmp_path / "hub.sqlite")]) == 2
    assert "no plan 'plan-x'" in capsys.readouterr().err


def test_tune_refuses_bad_lambdas(capsys):
    assert main(["tune", "--lambdas", "0.1,zero"]) == 2
    assert main(["tune", "--lambdas", "0.1,-1"]) == 2
    assert "--lambdas" in capsys.readouterr().err
    assert not ray.is_initialized()


def test_hub_dead_letters_and_status_show_refused_records(tmp_path, capsys):
    from rrsi.store import Store

    store = Store(tmp_path / "hub.sqlite")
    store.put_dead_letters([("calc", "records[0].error_code: unknown error code 'CALC_ODD_001'", '{"trace_id":"t7"}')])
    store.close()
    assert main(["hub", "dead-letters", "--store", str(tmp_path / "hub.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "CALC_ODD_001" in out and "calc" in out and '"trace_id":"t7"' in out
    assert main(["hub", "status", "--store", str(tmp_path / "hub.sqlite")]) == 0
    assert '"dead_letters": 1' in capsys.readouterr().out
