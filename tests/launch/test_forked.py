"""The fork server: a child forked per job from one process that imported the framework once -- a process of its own
per job (its pid, its crash, its timeout), results as a fresh process gives them, without the imports each time."""

from __future__ import annotations

import os
import time

from ampbench.launch import ChildProcess, Forked, Job
from ampbench.launch.process import _zygote

PRELOAD = ("ampbench.bench.jobs", "ampbench.frameworks.torch.cell")


def whoami(payload: dict[str, object]) -> dict[str, object]:
    import sys

    return {"pid": os.getpid(), "torch_loaded": "torch" in sys.modules, "echo": payload.get("x")}


def crash(payload: dict[str, object]) -> dict[str, object]:
    if payload.get("how") == "segv":
        os.kill(os.getpid(), 11)
    raise RuntimeError("a bad model, said on its last line")


def sleep(payload: dict[str, object]) -> dict[str, object]:
    time.sleep(60)
    return {}


def test_each_job_is_a_fresh_child_of_a_server_that_imported_the_framework_once() -> None:
    z = _zygote(PRELOAD)
    assert z is not None and z.ok  # (one thread after the imports: safe to fork)
    a, launch = Forked(PRELOAD).run_stamped(Job("tests.launch.test_forked:whoami", {"x": 1}))
    b = Forked(PRELOAD).run(Job("tests.launch.test_forked:whoami", {"x": 2}))
    assert a["echo"] == 1 and b["echo"] == 2 and a["torch_loaded"] and "_child" not in a
    assert len({a["pid"], b["pid"], z.proc.pid, os.getpid()}) == 4  # (each job a process of its own)
    assert launch is not None
    assert launch["spawned_at"] <= launch["started_at"] <= launch["returned_at"] <= launch["exited_at"]
    assert launch["started_at"] - launch["spawned_at"] < 1.0  # (a fork, not an interpreter importing torch)
    assert _zygote(PRELOAD) is z  # (one server for the run)


def test_a_crash_or_a_raise_is_the_childs_and_the_server_goes_on() -> None:
    segv = Forked(PRELOAD).run(Job("tests.launch.test_forked:crash", {"how": "segv"}))
    assert segv["_killed"] and "SIGSEGV" in segv["_failed"]
    raised = Forked(PRELOAD).run(Job("tests.launch.test_forked:crash", {}))
    assert not raised["_killed"] and "a bad model, said on its last line" in raised["_failed"]
    assert Forked(PRELOAD).run(Job("tests.launch.test_forked:whoami", {"x": 3}))["echo"] == 3


def test_a_timeout_kills_the_child_alone() -> None:
    t = time.perf_counter()
    r = Forked(PRELOAD, timeout=3).run(Job("tests.launch.test_forked:sleep"))
    assert r["_killed"] and r["_failed"].startswith("timed out after 3 s") and time.perf_counter() - t < 20
    assert Forked(PRELOAD).run(Job("tests.launch.test_forked:whoami", {"x": 4}))["echo"] == 4


def test_the_same_job_gives_what_a_fresh_process_gives() -> None:
    """Oracle: a ChildProcess (a fresh interpreter) runs the same cell: the same row but for its timings."""
    from ampbench.bench import RunConfig
    from ampbench.bench.jobs import job

    spec = RunConfig.of(device="cpu", workloads=("tabular-mlp",), presets=("tiny",), precisions=("amp-bf16",),
                        measures=("memory",), steps=2, warmup=1).cells()[0]
    forked = Forked(PRELOAD).run(job("cell", spec))
    fresh = ChildProcess().run(job("cell", spec))
    for key in ("status", "weights_bytes", "grads_bytes", "optimizer_bytes", "activation_bytes", "final_loss",
                "flops_per_step", "math_mode", "cell_key" if "cell_key" in fresh else "workload"):
        assert forked[key] == fresh[key], key


def env(payload: dict[str, object]) -> dict[str, object]:
    return {"value": os.environ.get("AMPBENCH_TEST_ENV")}


def test_a_child_sees_the_environment_a_fresh_process_would(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The server was started in another environment: a job after a change runs in a server started in the new one
    (what libraries read at import is the server's)."""
    monkeypatch.delenv("AMPBENCH_TEST_ENV", raising=False)
    assert Forked(PRELOAD).run(Job("tests.launch.test_forked:env"))["value"] is None
    monkeypatch.setenv("AMPBENCH_TEST_ENV", "x")
    assert Forked(PRELOAD).run(Job("tests.launch.test_forked:env"))["value"] == "x"
    assert ChildProcess().run(Job("tests.launch.test_forked:env"))["value"] == "x"  # (the oracle: a fresh process)


def server_env(payload: dict[str, object]) -> dict[str, object]:
    return {"value": os.environ.get("AMPBENCH_TEST_ENV"), "server": os.getppid(),
            "test": os.environ.get("PYTEST_CURRENT_TEST")}


def test_a_server_started_with_its_own_environment_is_another_server(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``env`` is the server's before its imports (Keras's backend): another value, another server; a child of each
    sees its own."""
    monkeypatch.delenv("AMPBENCH_TEST_ENV", raising=False)
    a = Forked(PRELOAD, env=(("AMPBENCH_TEST_ENV", "a"),)).run(Job("tests.launch.test_forked:server_env"))
    b = Forked(PRELOAD, env=(("AMPBENCH_TEST_ENV", "b"),)).run(Job("tests.launch.test_forked:server_env"))
    again = Forked(PRELOAD, env=(("AMPBENCH_TEST_ENV", "a"),)).run(Job("tests.launch.test_forked:server_env"))
    plain = Forked(PRELOAD).run(Job("tests.launch.test_forked:server_env"))
    assert (a["value"], b["value"], again["value"], plain["value"]) == ("a", "b", "a", None)
    assert a["server"] == again["server"] and len({a["server"], b["server"], plain["server"], os.getpid()}) == 4


def test_pytests_name_of_the_test_starts_no_server_and_reaches_the_child(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """PYTEST_CURRENT_TEST changes with every test (no library reads it at import): one server across its values, each
    child given the value of when it was forked."""
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "first")
    first = Forked(PRELOAD).run(Job("tests.launch.test_forked:server_env"))
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "second")
    second = Forked(PRELOAD).run(Job("tests.launch.test_forked:server_env"))
    assert (first["test"], second["test"]) == ("first", "second") and first["server"] == second["server"]


def where(payload: dict[str, object]) -> dict[str, object]:
    return {"cwd": os.getcwd()}


def test_a_child_works_in_the_launcher_s_directory_of_now(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A relative path (``--model my_model.py:build``) means what it means to the launcher when the job is sent, as in
    a fresh process: not the directory the server started in."""
    first = Forked(PRELOAD).run(Job("tests.launch.test_forked:where"))
    monkeypatch.chdir(tmp_path)
    second = Forked(PRELOAD).run(Job("tests.launch.test_forked:where"))
    assert second["cwd"] == str(tmp_path) != first["cwd"]


def test_a_server_started_in_another_directory_imports_from_the_launcher_s(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A server started while a test had moved into a sandbox (a fresh environment: a server of its own) put that
    directory first on its children's sys.path: back in the checkout, a job of this package read "No module named
    'tests'" (seen after test_docs, in one pytest process)."""
    home = os.getcwd()
    monkeypatch.setenv("AMPBENCH_TEST_SERVER_STARTED_IN", str(tmp_path))  # (another environment: another server)
    monkeypatch.chdir(tmp_path)
    z = _zygote(PRELOAD)  # (started here, in tmp_path)
    assert z is not None and z.ok
    monkeypatch.chdir(home)
    back = Forked(PRELOAD).run(Job("tests.launch.test_forked:where"))
    assert back.get("cwd") == home, back


def loaded(payload: dict[str, object]) -> dict[str, object]:
    import sys

    return {name: name in sys.modules for name in payload["names"]}  # type: ignore[union-attr]


def test_warm_modules_are_imported_once_where_a_fork_stays_cuda_safe() -> None:
    """torch._dynamo (every cell's first optimizer imports it: 3.4-5.3 s a cell on the lent H200) in the server, once;
    a warm module after which a child could not use CUDA is dropped -- the server starts again without it -- and the
    server still serves."""
    names = ["torch._dynamo", "tests.launch.poisons_cuda_fork"]
    kept = _zygote(PRELOAD, warm=("torch._dynamo",))
    assert kept is not None and kept.ok and kept.warm == ("torch._dynamo",)
    assert Forked(PRELOAD, warm=("torch._dynamo",)).run(Job("tests.launch.test_forked:loaded", {"names": names})) == {
        "torch._dynamo": True, "tests.launch.poisons_cuda_fork": False}
    dropped = _zygote(PRELOAD, warm=("tests.launch.poisons_cuda_fork",))
    assert dropped is not None and dropped.ok and dropped.warm == ()
    missing = _zygote(PRELOAD, warm=("tests.launch.no_such_module",))  # (one that does not import: dropped too)
    assert missing is not None and missing.ok and missing.warm == ()
    assert Forked(PRELOAD, warm=("tests.launch.poisons_cuda_fork",)).run(
        Job("tests.launch.test_forked:loaded", {"names": names}))["tests.launch.poisons_cuda_fork"] is False


def test_a_torch_cell_s_server_keeps_torch_dynamo_warm() -> None:
    from ampbench.bench.jobs import launcher
    from ampbench.cells import CellSpec

    spec = CellSpec.of(workload="tabular-mlp", preset="tiny", precision="fp32", batch_size=None, device="cpu", steps=2)
    forked = launcher(spec, None)
    assert isinstance(forked, Forked) and forked.warm == ("torch._dynamo",)
    assert forked.run(Job("tests.launch.test_forked:loaded", {"names": ["torch._dynamo"]})) == {"torch._dynamo": True}
