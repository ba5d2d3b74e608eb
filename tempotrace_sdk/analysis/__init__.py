"""Causal analysis: order events by physics, Lamport and SVC; catch lying clocks;
simulate the paper's Table 2; render Perfetto and HTML (spec/analysis.md).

Library entry points: ``analyze_file(path, topology=None) -> AnalysisReport``,
``analyze_spans(spans)``, ``write_json / write_perfetto / write_html(report, path)``
(atomic), ``decide(a, b)``, ``run_simulation()``. numpy is needed only by the
simulator (the ``analysis`` extra).
"""

from .api import analyze_file, analyze_spans, records_from_readable
from .events import Event, SpanRecord, Stamp
from .faults import FaultLedger, HostFault
from .order import Decision, Method, Relation, decide
from .otlp_reader import TraceFileError, iter_spans
from .report import AnalysisReport
from .topology import Topology, TopologyError, load_topology
from .writers import write_html, write_json, write_perfetto

__all__ = [
    "AnalysisReport",
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
