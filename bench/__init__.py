"""codemode's benchmark suites, installed with the package and run by ``codemode bench``.

Suites (``SUITES``): ``startup``, ``roundtrip``, ``fanout``, ``mixed``, ``pipeline``,
``payload``, ``compute``, ``host-load``, ``tools``. Each measures codemode's two guests and, in the
same run on the same workload, the peers that are installed (the ``bench`` extra:
pydantic-monty, smolagents' local executor) and an in-process asyncio floor; a missing
peer is reported as ``"missing: <why>"``. ``run_bench`` returns a ``Report`` (its JSON:
``{"env", "suites", "peers"}``), ``check_exit_code`` is ``--check``'s verdict against
``TARGETS``, ``write_plot`` draws the fan-out figure.
"""

from __future__ import annotations

from ._env import DISABLE_ENV as DISABLE_ENV
from ._model import Report as Report
from ._model import Row as Row
from ._model import SuiteResult as SuiteResult
from ._model import Target as Target
from ._plot import PlotUnavailable as PlotUnavailable
from ._plot import plot_available as plot_available
from ._plot import write_plot as write_plot
from ._render import console_for as console_for
from ._render import render_report as render_report
from ._runner import SUITES as SUITES
from ._runner import BenchError as BenchError
from ._runner import BenchOptions as BenchOptions
from ._runner import report_json as report_json
from ._runner import resolve_suites as resolve_suites
from ._runner import run_bench as run_bench
from ._script import script_main as script_main
from ._targets import TARGETS as TARGETS
from ._targets import TargetSpec as TargetSpec
from ._targets import apply_targets as apply_targets
from ._targets import check_exit_code as check_exit_code
from ._targets import missed_targets as missed_targets

__all__ = [
    "DISABLE_ENV",
    "SUITES",
    "TARGETS",
    "BenchError",
    "BenchOptions",
    "PlotUnavailable",
    "Report",
    "Row",
    "SuiteResult",
    "Target",
    "TargetSpec",
    "apply_targets",
    "check_exit_code",
    "console_for",
    "missed_targets",
    "plot_available",
    "render_report",
    "report_json",
    "resolve_suites",
    "run_bench",
    "script_main",
    "write_plot",
]
