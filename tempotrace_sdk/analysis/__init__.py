"""Causal analysis: order events by physics, Lamport and SVC, and torch messages and collectives by the
trace's own structure (derived); catch lying clocks; simulate the paper's Table 2; render Perfetto and
HTML (spec/analysis.md).

Library entry points: ``analyze(inputs, topology=None, ...) -> AnalysisReport``
(files, directories, globs or "-"; ``analyze_file`` for one), ``analyze_spans(spans)``,
``write_json / write_perfetto / write_html(report, path)`` (atomic), ``decide(a, b)``,
``run_simulation()``. numpy is needed only by the simulator (the ``analysis``
extra), dask only by ``engine="dask"`` (the ``dask`` extra).
"""

from .api import analyze, analyze_file, analyze_spans, records_from_readable
from .events import Event, SpanRecord, Stamp
from .faults import FaultLedger, HostFault
from .inputs import TraceFileError, TraceIOError
from .order import Decision, Method, Relation, decide
from .reader import iter_spans
from .report import AnalysisReport
from .topology import Topology, TopologyError, load_topology
from .values import AttributeRuleError
from .writers import write_html, write_json, write_perfetto

__all__ = [
    "AnalysisReport",
    "AttributeRuleError",
    "Decision",
    "Event",
    "FaultLedger",
    "HostFault",
    "Method",
    "Relation",
    "SpanRecord",
    "Stamp",
    "Topology",
    "TopologyError",
    "TraceFileError",
    "TraceIOError",
    "analyze",
    "analyze_file",
    "analyze_spans",
    "decide",
    "iter_spans",
    "load_topology",
    "records_from_readable",
    "write_html",
    "write_json",
    "write_perfetto",
]
