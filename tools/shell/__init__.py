"""The shell tools: ``bash`` and the background-job tools ``job_list``/``job_output``/``job_kill``.

Commands run on the host (not in the code sandbox), in the workspace, as children of a small
launcher that contains them: ``_cgroup`` gives each call its own cgroup, ``_launcher`` is the
process between the host and ``bash`` (it joins that cgroup, drops the capabilities that
would let a root command leave it, and reaps every descendant), and ``_process`` spawns the
launcher and kills whatever a call started, so nothing outlives its call. ``_bash`` is the
tool; ``_jobs`` is the ``JobManager`` that owns ``run_in_background`` processes (each job is
private to the agent that started it), and ``_job_tools`` are the tools that list, read and
kill jobs. ``_env`` decides which of the host's environment variables a command sees (an
allow-list by default: the host's secrets stay out). Failures are ``BashError``/``JobError`` with ``BASH_*``/``JOB_*`` codes.
"""

from ._env import PASS_THROUGH

__all__ = ["PASS_THROUGH"]
