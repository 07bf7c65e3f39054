"""``rrsi generate-scenario``, and ``train-reflector`` / ``eval-reflector`` on generated pipelines."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from rrsi.cli import lazy
from rrsi.cli.main import main
from rrsi.cli.options import SIM_WORKERS
from rrsi.scenario import bundled_names, load_scenario
from rrsi.sim.generator import EVAL_SEEDS, generate_scenario


def test_generate_scenario_writes_the_scenario_of_its_seed(tmp_path, capsys):
    out = tmp_path / "g.yaml"
    assert main(["generate-scenario", "--seed", "42", "--out", str(out)]) == 0
    assert load_scenario(out) == generate_scenario(42)
    assert main(["generate-scenario", "--seed", "42"]) == 0
    assert capsys.readouterr().out == out.read_text()
    args = ["--seed", "5", "--shape", "diamond", "--agents", "6", "--hard", "--rounds", "3", "--tasks-per-round", "20"]
    assert main(["generate-scenario", *args, "--out", str(out)]) == 0
    assert load_scenario(out) == generate_scenario(
        5, shape="diamond", agents=6, hard=True, rounds=3, tasks_per_round=20
    )
    assert out.read_text().startswith("# rrsi generate-scenario " + " ".join(args[:2]))


def test_generate_scenario_refuses_bad_arguments(tmp_path, capsys):
    assert main(["generate-scenario", "--seed", "1", "--shape", "diamond", "--agents", "3"]) == 2
    assert "agents: a diamond pipeline has 4..15 agents" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["generate-scenario", "--seed", "1", "--agents", "2"])
    assert exit_.value.code == 2
    assert main(["generate-scenario", "--seed", "1", "--out", str(tmp_path / "no" / "where.yaml")]) == 2
    assert "--out: cannot write" in capsys.readouterr().err


class _Calls(list):
    """Records ``(name, args, kwargs)`` of the fake heavy modules' calls."""

    def fake(self, name, result=None):
        def call(*args, **kwargs):
            self.append((name, args, kwargs))
            return result(*args, **kwargs) if callable(result) else result

        return call


@pytest.fixture
def calls(monkeypatch, tmp_path):
    """The LM modules replaced by recorders: nothing is simulated, trained or loaded."""
    calls = _Calls()
    example = SimpleNamespace(source="generated")
    metrics = {"incidents": 1, "error_type_accuracy": 1.0, "root_agent_agreement": 0.5, "action_accuracy": 0.25}
    fakes = {
        "lm_data": SimpleNamespace(
            synthetic_examples=calls.fake("synthetic_examples", [example]),
            whowhen_examples=calls.fake("whowhen_examples", []),
        ),
        "lm_generated": SimpleNamespace(
            generated_examples=calls.fake("generated_examples", [example, example]),
            examples_registry=calls.fake("examples_registry", "registry"),
        ),
        "lm_adapters": SimpleNamespace(
            DEFAULT_TRAINING={"steps": 40},
            resolve_adapter=lambda name: tmp_path / name,
            save_trained=calls.fake("save_trained", lambda *a, **k: (tmp_path / "out", {"loss": 0.1})),
        ),
        "lm_reflector": SimpleNamespace(
            LMReflector=calls.fake("LMReflector", lambda *a, **k: SimpleNamespace(model="m", tokenizer="t"))
        ),
        "rule_reflector": SimpleNamespace(RuleReflector=calls.fake("RuleReflector", "rule")),
        "lm_evaluation": SimpleNamespace(evaluate_synthetic=calls.fake("evaluate_synthetic", lambda *a: dict(metrics))),
    }
    for name, fake in fakes.items():
        monkeypatch.setattr(lazy, name, fake)
    return calls


WORKERS = SIM_WORKERS  # the commands simulate in up to two forked processes


def _named(calls, name):
    return [(args, kwargs) for n, args, kwargs in calls if n == name]


def test_train_on_generated_pipelines_leaves_the_bundled_scenarios_out(calls, capsys):
    assert main(["train-reflector", "--generated", "3", "--per-pipeline", "2", "--quiet", "--out", "g"]) == 0
    assert not _named(calls, "synthetic_examples")  # no incidents of the bundled scenario
    assert _named(calls, "generated_examples") == [((3, 2), {"seed": 0, "workers": WORKERS})]
    ((args, kwargs),) = _named(calls, "save_trained")
    assert len(args[0]) == 2 and args[1] == "registry" and args[3] == "g"
    assert kwargs["info"] == {"generated": {"pipelines": 3, "per_pipeline": 2, "seeds": [0, 2]}}
    assert json.loads(capsys.readouterr().out)["adapter"].endswith("out")


def test_train_can_mix_generated_pipelines_with_scenario_incidents(calls):
    assert main(["train-reflector", "--generated", "1", "--incidents", "5", "--seed", "7", "--quiet"]) == 0
    (((scenario, n), kwargs),) = _named(calls, "synthetic_examples")
    assert (scenario.name, n, kwargs) == ("loan-approval", 5, {"seed": 7})
    assert _named(calls, "generated_examples") == [((1, 4), {"seed": 7, "workers": WORKERS})]
    assert len(_named(calls, "save_trained")[0][0][0]) == 3


def test_train_without_data_says_which_options_give_some(calls, capsys):
    assert main(["train-reflector", "--incidents", "0"]) == 2
    assert "--generated N" in capsys.readouterr().err


def test_eval_scores_each_scenario_and_the_held_out_pipelines(calls, capsys):
    argv = ["eval-reflector", "--adapter", "none", "--generated", "2", "--incidents", "3"]
    assert main([*argv, "--scenario", "diamond", "--scenario", "steady"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert list(report) == ["diamond", "steady", "generated"]
    assert [a[0].name for a, _ in _named(calls, "synthetic_examples")] == ["diamond", "steady"]
    assert _named(calls, "generated_examples") == [((2, 3), {"seed": 1000, "split": "eval", "workers": WORKERS})]
    assert report["generated"]["pipelines"] == 2
    assert report["generated"]["seeds"] == [EVAL_SEEDS[0] + 1000, EVAL_SEEDS[0] + 1001]
    for r in report.values():
        assert r["action_accuracy"] == 0.25 and r["rule_baseline"]["action_accuracy"] == 0.25
    # the model is loaded once and shared by the reflector of every source
    built = _named(calls, "LMReflector")
    assert len(built) == 3 and "model" not in built[0][1] and all(k["model"] == "m" for _, k in built[1:])
    assert "generated" in captured.err and "25% (25%)" in captured.err  # the table


def test_eval_takes_every_bundled_scenario_by_default_and_none_for_none(calls, capsys):
    assert main(["eval-reflector", "--adapter", "none", "--generated", "0", "--incidents", "1"]) == 0
    assert list(json.loads(capsys.readouterr().out)) == bundled_names()
    assert main(["eval-reflector", "--adapter", "none", "--scenario", "none", "--generated", "1"]) == 0
    assert list(json.loads(capsys.readouterr().out)) == ["generated"]


@pytest.mark.parametrize("command", ["train-reflector", "eval-reflector"])
def test_a_whowhen_folder_that_is_not_there_is_refused_before_any_work(calls, capsys, command):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--whowhen", "none"])
    assert exit_.value.code == 2
    assert "--whowhen: expected an existing folder (got 'none')" in capsys.readouterr().err
    assert not calls  # nothing simulated, loaded or trained


@pytest.mark.slow
def test_train_and_eval_a_tiny_adapter_on_generated_pipelines(tmp_path, capsys):
    adapter = tmp_path / "gen"
    small = ["--seed", "658"]  # train pipelines 658, 659 and held-out 1000658 have 3-4 agents: short prompts
    tiny = ["--steps", "1", "--batch-size", "2", "--lora-layers", "1", "--threads", "1", "--quiet"]
    argv = ["train-reflector", "--generated", "2", "--per-pipeline", "1", "--out", str(adapter), *small, *tiny]
    assert main(argv) == 0
    info = json.loads((adapter / "training.json").read_text())
    assert info["sources"] == ["generated"] and info["generated"]["seeds"] == [658, 659] and info["steps"] == 1
    capsys.readouterr()
    argv = ["eval-reflector", "--adapter", str(adapter), "--generated", "1", "--incidents", "1", "--scenario", "steady"]
    assert main([*argv, *small]) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(report) == ["steady", "generated"] and report["generated"]["seeds"] == [EVAL_SEEDS[0] + 658] * 2
    for r in report.values():
        assert r["incidents"] == 1 and r["parse_validate_rate"] == 1.0
        assert 0.0 <= r["action_accuracy"] <= 1.0 and "action_accuracy" in r["rule_baseline"]


@pytest.mark.slow
def test_the_demo_runs_a_generated_scenario_file(ray_module, tmp_path):
    scenario, result = tmp_path / "g.yaml", tmp_path / "demo.json"
    argv = ["--seed", "11", "--hard", "--tasks-per-round", "20", "--out", str(scenario)]
    assert main(["generate-scenario", *argv]) == 0
    assert main(["demo", "--scenario", str(scenario), "--mode", "none", "--rounds", "2", "--json", str(result)]) == 0
    report = json.loads(result.read_text())
    assert report["scenario"] == "generated-11-chain" and report["rounds"] == 2
    rounds = report["modes"]["none"]["rounds"]
    assert len(rounds) == 2 and set(rounds[0]["per_agent"]) == {a.name for a in load_scenario(scenario).agents}
