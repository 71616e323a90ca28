"""Layer 5: the session API every front end (CLI, notebook magic, widget) goes through."""

from ..agent.sweep import SweepOutcome, SweepReport, SweepSettings
from .session import Session, evaluate_once

__all__ = ["Session", "SweepOutcome", "SweepReport", "SweepSettings", "evaluate_once"]
