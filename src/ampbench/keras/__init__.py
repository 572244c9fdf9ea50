"""Keras 3 models measured under Keras's own mixed precision policies, on the TensorFlow, JAX or PyTorch backend.

A Keras cell is a cell of its own framework (see docs/architecture.md, "Adding a framework"): the runner starts it
in a child process (a Keras backend is chosen before keras is imported, so the backend is part of the cell's
identity), :mod:`ampbench.keras.cell` measures it there and returns a row like a PyTorch cell's, with the Keras
fields added. Modules:

- :mod:`~ampbench.keras.backends`  which backend, installed or not, chosen before import; versions; TF32 switches
- :mod:`~ampbench.keras.policy`    ampbench's precision names <-> Keras's dtype policies; what is refused and why
- :mod:`~ampbench.keras.workloads` ``keras-conv-dummy`` and the user's ``--model`` factory returning a keras.Model
- :mod:`~ampbench.keras.cell`      one cell measured: fit's train step timed, memory, inference, convergence
- :mod:`~ampbench.keras.memory`    the backends' GPU memory trackers, RSS growth on a CPU, out-of-memory on any backend
- :mod:`~ampbench.keras.train`     ``ampbench train`` of a Keras model (epochs under the policy, in its own process)
- :mod:`~ampbench.keras.diagnose`  ``ampbench diagnose`` of a Keras model: the nonfinite, policy and tensorcore checks

Nothing here imports keras at module import: the backend must be set first (:func:`backends.activate`).
"""
