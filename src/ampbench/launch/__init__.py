"""Everything that starts a process: a :class:`Job` (a function by import path and a JSON payload) runs
:class:`Inline` (this process), in a :class:`ChildProcess` (an OOM, crash or hang becomes a result) or in
torchrun ranks (:class:`Torchrun`); children and ranks die with their parent (:mod:`ampbench.launch.lifeline`).

Launchers move JSON and never import what a job does: ``bench`` uses ``launch``, never the reverse.
"""

from ampbench.launch.job import Job
from ampbench.launch.lifeline import describe_exit, die_with_launcher, die_with_parent
from ampbench.launch.process import ChildProcess, Forked, Inline, Started, close_zygotes
from ampbench.launch.rank import become_rank, join_process_group
from ampbench.launch.torchrun import RankResults, Torchrun, check_nodes, free_port, is_rank, node_args, relaunch

__all__ = [
           "ChildProcess",
           "Forked",
           "Inline",
           "Job",
           "RankResults",
           "Started",
           "Torchrun",
           "become_rank",
           "check_nodes",
           "close_zygotes",
           "describe_exit",
           "die_with_launcher",
           "die_with_parent",
           "free_port",
           "is_rank",
           "join_process_group",
           "node_args",
           "relaunch",
]
