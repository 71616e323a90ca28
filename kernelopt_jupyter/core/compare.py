"""Comparing a candidate's output with the reference, magnitude-aware and NaN-strict.

Written against an array module ``xp`` (NumPy or CuPy) so the same rules run wherever the outputs
are: on the host, or on the device in the worker without copying large outputs back.

An output passes when every element satisfies ``|got - want| <= atol + rtol * |want|`` and the
relative norm of the error, ``‖got - want‖ / ‖want‖``, stays under its bound. NaN or Inf where the
reference is finite always fails, and a NaN is never "close" to anything. Integer outputs must match
exactly.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .results import Mismatch, OutputCheck
from .workload import Tolerance


def _text(value: Any) -> str:
    return repr(value.item()) if hasattr(value, "item") else repr(value)


def compare_output(name: str, got: Any, expected: Any, tolerance: Tolerance, xp: Any = np) -> OutputCheck:
    if tuple(got.shape) != tuple(expected.shape):
        return OutputCheck(
            name=name, passed=False, reason=f"shape {tuple(got.shape)} != expected {tuple(expected.shape)}"
        )
    if got.size == 0:
        return OutputCheck(name=name, passed=True)
    exact = np.dtype(got.dtype).kind in "iub" and np.dtype(expected.dtype).kind in "iub"
    g = got.astype(xp.float64, copy=False).ravel()
    e = expected.astype(xp.float64, copy=False).ravel()
    passed = _passing_check(name, g, e, exact, tolerance, xp)
    if passed is not None:
        return passed
    e_finite = xp.isfinite(e)
    g_finite = xp.isfinite(g)
    both_finite = e_finite & g_finite
    nonfinite_mask = e_finite & ~g_finite
    special_mask = ~e_finite & ~((xp.isnan(e) & xp.isnan(g)) | (g == e))
    diff = xp.where(both_finite, g, 0.0) - xp.where(both_finite, e, 0.0)
    abs_diff = xp.abs(diff)
    abs_e = xp.where(e_finite, xp.abs(e), 0.0)
    outside = abs_diff != 0 if exact else abs_diff > tolerance.atol + tolerance.rtol * abs_e
    bad = outside | nonfinite_mask | special_mask
    mismatches = int(bad.sum())
    nonfinite = int(nonfinite_mask.sum())
    max_abs = float(abs_diff.max())
    rel = xp.where(abs_e > 0, abs_diff / xp.where(abs_e > 0, abs_e, 1.0), 0.0)
    max_rel = float(rel.max())
    norm_diff = math.sqrt(float((diff * diff).sum()))
    norm_e = math.sqrt(float((abs_e * abs_e).sum()))
    rel_norm = norm_diff / norm_e if norm_e > 0 else norm_diff
    if nonfinite:
        rel_norm = math.inf
    check = OutputCheck(
        name=name,
        passed=True,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        rel_norm_error=rel_norm,
        mismatches=mismatches,
        nonfinite=nonfinite,
    )
    reasons = []
    if mismatches:
        flat = int(xp.argmax(bad))
        index = [int(i) for i in np.unravel_index(flat, tuple(got.shape))]
        check.first_mismatch = Mismatch(
            index=index, got=_text(got.ravel()[flat]), expected=_text(expected.ravel()[flat])
        )
        what = "differ" if exact else "are outside tolerance"
        reasons.append(
            f"{mismatches} of {got.size} elements {what}; first at {index}: "
            f"got {check.first_mismatch.got}, expected {check.first_mismatch.expected}"
        )
    if nonfinite:
        reasons.append(f"{nonfinite} NaN/Inf where the reference is finite")
    if not exact and tolerance.max_rel_norm is not None and rel_norm > tolerance.max_rel_norm:
        reasons.append(f"relative norm error {rel_norm:.3g} exceeds {tolerance.max_rel_norm:.3g}")
    if reasons:
        check.passed = False
        check.reason = f"{name}: " + "; ".join(reasons)
    return check


def _passing_check(
    name: str, g: Any, e: Any, exact: bool, tolerance: Tolerance, xp: Any
) -> OutputCheck | None:
    """The common case, every element within tolerance of a finite reference, in about half the
    passes over the data of the general path below; None when anything is off (the general path
    then finds and describes it)."""
    if exact:
        if not bool((g == e).all()):
            return None
        return OutputCheck(
            name=name, passed=True, max_abs_error=0.0, max_rel_error=0.0, rel_norm_error=0.0, mismatches=0
        )
    if not bool(xp.isfinite(e).all()):
        return None
    diff = g - e
    abs_diff = xp.abs(diff)
    abs_e = xp.abs(e)
    if not bool((abs_diff <= tolerance.atol + tolerance.rtol * abs_e).all()):  # NaN compares False
        return None
    norm_diff = math.sqrt(float(xp.dot(diff, diff)))
    norm_e = math.sqrt(float(xp.dot(e, e)))
    rel_norm = norm_diff / norm_e if norm_e > 0 else norm_diff
    if tolerance.max_rel_norm is not None and rel_norm > tolerance.max_rel_norm:
        return None
    return OutputCheck(
        name=name,
        passed=True,
        max_abs_error=float(abs_diff.max()),
        max_rel_error=float((abs_diff / xp.where(abs_e > 0, abs_e, xp.inf)).max()),
        rel_norm_error=rel_norm,
        mismatches=0,
        nonfinite=0,
    )


def is_degenerate(expected: Any, xp: Any = np) -> str | None:
    """Why a reference output cannot tell a right kernel from a lazy one (all ≈ 0, or constant)."""
    if expected.size == 0:
        return "the reference output is empty"
    e = expected.astype(xp.float64, copy=False).ravel()
    finite = e[xp.isfinite(e)]
    if finite.size == 0:
        return "the reference output has no finite values"
    largest = float(xp.abs(finite).max())
    if largest < 1e-30:
        return "the reference output is all zeros: a kernel writing zeros would pass"
    if finite.size > 1 and float(finite.max() - finite.min()) <= 1e-12 * largest:
        return "the reference output is constant: a kernel writing that constant would pass"
    return None
