

def test_the_workload_s_own_length_and_a_tiny_run_in_seconds() -> None:
    """converge_steps None trains the workload's epochs over its split (hand count); a tiny run's convergence
    (the preset's 30 steps x 2 seeds) takes seconds and the row says what ran."""
    import math
    import time

    from ampbench.bench import RunConfig, run
    from ampbench.measure.converge import workload_length
    from ampbench.store import Store
    from ampbench.workloads import create_workload

    wl = create_workload("tabular-mlp", "tiny", seed=0)
    n = len(wl.train_data)
    full = n // 5 if n > 5 else 1
    assert workload_length(wl, 5) == wl.epochs * full
    assert workload_length(wl, n + 1) == wl.epochs * 1
    assert workload_length(wl, 16) == wl.epochs * (n // 16 if n > 16 else math.ceil(n / 16))

    config = RunConfig.from_strings(device="cpu", workloads="tabular-mlp", preset="tiny", precisions="fp32",
                                    measure="converge", isolate=False)
    t0 = time.perf_counter()
    _, rows = run(config, Store(":memory:"))
    assert time.perf_counter() - t0 < 60
    conv = rows[0]["converge"]
    assert conv["steps"] == 30 and conv["seeds"] == [0, 1] and len(conv["losses"]) == 2
    assert all(len(c) == 30 for c in conv["losses"])
