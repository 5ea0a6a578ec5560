"""Typed data shared across the advisor: what was measured, what was deployed, what was asked.

These types are defined once here and reused by the probe, the performance model, the diagnosis
and the chat; no module re-parses another's input.
"""

from .bench import BenchmarkRun, ConsistencyCheck, Distribution, ServerView, StreamDelivery
from .case import CaseFile, CaseReport, LatencyFigures, Observation, Workload
from .cause_ids import CAUSE_IDS, CauseId
from .deployment import Deployment, EngineArgs
from .finding import Citation, Diagnosis, Evidence, Fact, Finding, MissingMeasurement, Recommendation, SimilarReport
from .message import Msg, Quantity
from .metrics import MetricFamily, MetricSample, MetricsSnapshot, MetricsWindow, SeriesWindow
from .notes import InputNote
from .serverlog import ServerLogInfo, ServerStatsLine
from .stated import StatedFacts
from .validation import FigureComparison, FigureError, KvValidation, PointValidation, ValidationReport

__all__ = [
    "BenchmarkRun",
    "CAUSE_IDS",
    "CaseFile",
    "CaseReport",
    "CauseId",
    "Citation",
    "Diagnosis",
    "Evidence",
    "Fact",
    "Msg",
    "Quantity",
    "Finding",
    "MissingMeasurement",
    "Recommendation",
    "ConsistencyCheck",
    "Deployment",
    "Distribution",
    "EngineArgs",
    "InputNote",
    "LatencyFigures",
    "MetricFamily",
    "MetricSample",
    "MetricsSnapshot",
    "MetricsWindow",
    "Observation",
    "SeriesWindow",
    "ServerLogInfo",
    "ServerView",
    "StreamDelivery",
    "ServerStatsLine",
    "SimilarReport",
    "StatedFacts",
    "Workload",
    "FigureComparison",
    "FigureError",
    "KvValidation",
    "PointValidation",
    "ValidationReport",
]
