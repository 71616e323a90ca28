"""``load_workload``: read a spec file and reject anything wrong with it before any code runs.

Two passes: pydantic checks each field's form (unknown fields, types, expressions), then
:func:`check_workload` checks how fields fit together (shapes name known size variables, the
kernel's parameter list matches the signature, the reference exists). Every problem names the file,
the field and its line, and all problems are reported at once.
"""

from __future__ import annotations

import ast
import importlib.util
import keyword
import warnings
from pathlib import Path
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationError

from .callables import CallableNotFound, resolve_callable, split_reference
from .cuda_source import find_kernel
from .errors import ExpressionError, SpecError, SpecProblem, SpecWarning
from .expressions import parse_condition, parse_expression
from .specfile import SpecDocument, read_spec_document
from .workload import KernelSource, LaunchSpec, Workload


def load_workload(path: str | Path) -> Workload:
    """Load and fully check a workload spec (YAML or JSON). Raises :class:`SpecError`."""
    document = read_spec_document(path)
    try:
        workload = Workload.model_validate(document.data)
    except ValidationError as exc:
        raise SpecError(str(document.path), _pydantic_problems(exc, document)) from None
    workload.bind_location(str(document.path), document.path.resolve().parent)
    problems = check_workload(workload)
    for problem in problems:
        if problem.line is None:
            problem_path = tuple(int(p) if p.isdigit() else p for p in _split_field(problem.field))
            object.__setattr__(problem, "line", document.line_of(problem_path))
    if problems:
        raise SpecError(str(document.path), problems)
    for message in spec_warnings(workload):
        workload.warnings.append(f"{document.path}: {message}")
        warnings.warn(f"{document.path}: {message}", SpecWarning, stacklevel=2)
    return workload


def spec_warnings(workload: Workload) -> list[str]:
    """Things that load fine but make a wrong kernel likely to pass."""
    sizes = [value for case in workload.cases for value in case.sizes.values()]
    if sizes and all(v > 0 and (v & (v - 1) == 0 or v % 32 == 0) for v in sizes):
        return [
            "cases: every case size is a power of two or a multiple of 32, so a kernel that ignores "
            "bounds checks would pass; add a case with odd sizes (e.g. 1000 or 4097)"
        ]
    return []


def validate_workload(workload: Workload) -> Workload:
    """Run the cross-field checks on a workload built in Python; raise :class:`SpecError`."""
    problems = check_workload(workload)
    if problems:
        raise SpecError(workload.spec_path, problems)
    return workload


def check_workload(workload: Workload) -> list[SpecProblem]:
    problems: list[SpecProblem] = []

    def problem(field: str, message: str, line: int | None = None) -> None:
        problems.append(SpecProblem(field, message, line))

    sizes = _check_cases(workload, problem)
    knobs = workload.knob_names()
    for name in sorted(knobs & sizes):
        problem(f"tuning.knobs.{name}", f"knob {name!r} has the name of a size variable; rename one of them")
    _check_names(workload, problem)
    for index, parameter in enumerate(workload.signature):
        where = f"signature[{index}]"
        for axis, item in enumerate(parameter.shape or []):
            _check_names_in(item, sizes, f"{where}.shape[{axis}]", "size variable", problem)
        if not parameter.is_pointer and parameter.input is None:
            if parameter.value is None and parameter.name not in sizes:
                problem(
                    where,
                    f"scalar {parameter.name!r} needs 'value' or 'input' "
                    f"(there is no size variable named {parameter.name!r})",
                )
            elif parameter.value is not None:
                _check_names_in(
                    parameter.value, sizes | knobs, f"{where}.value", "size variable or knob", problem
                )
        if parameter.tolerance is not None and not parameter.is_output:
            problem(f"{where}.tolerance", "only outputs (role out or inout) are compared")
        if parameter.input is not None and parameter.input.generator is not None:
            _check_callable(parameter.input.generator, workload.base_dir, f"{where}.input.generator", problem)
    if not workload.outputs:
        problem("signature", "no parameter has role 'out' or 'inout', so there is nothing to check")
    _check_launch(workload.launch, workload, sizes | knobs, "launch", problem)
    if workload.work is not None:
        for name in ("flops", "bytes"):
            expression = getattr(workload.work, name)
            if expression is not None:
                _check_names_in(expression, sizes, f"work.{name}", "size variable", problem)
    if workload.tuning is not None:
        knob_values = workload.tuning.knobs.items()
        numeric = {name for name, values in knob_values if all(isinstance(v, int | float) for v in values)}
        for index, restriction in enumerate(workload.tuning.restrictions):
            where = f"tuning.restrictions[{index}]"
            _check_names_in(restriction, numeric, where, "numeric knob", problem, condition=True)
    _check_kernel(workload.kernel, workload, "kernel", problem)
    reference = workload.reference
    if reference.python is not None:
        _check_callable(reference.python, workload.base_dir, "reference.python", problem)
    elif reference.cuda is not None:
        _check_kernel(reference.cuda, workload, "reference.cuda", problem)
        _check_launch(reference.cuda.launch, workload, sizes, "reference.cuda.launch", problem)
    if workload.baseline is not None:
        _check_callable(workload.baseline.python, workload.base_dir, "baseline.python", problem, run=False)
    return problems


def _check_cases(workload: Workload, problem: Any) -> set[str]:
    first = set(workload.cases[0].sizes)
    seen: set[str] = set()
    for index, case in enumerate(workload.cases):
        if case.name in seen:
            problem(f"cases[{index}].name", f"case name {case.name!r} is used twice")
        seen.add(case.name)
        if set(case.sizes) != first:
            problem(
                f"cases[{index}].sizes",
                f"size variables {sorted(case.sizes)} differ from the first case's {sorted(first)}",
            )
        for name, value in {**case.sizes, **(case.emulation_sizes or {})}.items():
            if value < 0:
                problem(f"cases[{index}].sizes.{name}", f"size must be >= 0, got {value}")
        extra = set(case.emulation_sizes or {}) - set(case.sizes)
        if extra:
            problem(f"cases[{index}].emulation_sizes", f"names {sorted(extra)} are not size variables")
    return first


def _check_names(workload: Workload, problem: Any) -> None:
    seen: set[str] = set()
    for index, parameter in enumerate(workload.signature):
        if not parameter.name.isidentifier() or keyword.iskeyword(parameter.name):
            problem(f"signature[{index}].name", f"{parameter.name!r} is not usable as a Python argument name")
        if parameter.name in seen:
            problem(f"signature[{index}].name", f"parameter name {parameter.name!r} is used twice")
        seen.add(parameter.name)


def _check_names_in(
    text: Any, known: set[str], field: str, kind: str, problem: Any, condition: bool = False
) -> None:
    try:
        expression = parse_condition(text) if condition else parse_expression(text)
    except ExpressionError as exc:
        problem(field, str(exc))
        return
    unknown = sorted(expression.names - known)
    if unknown:
        names = ", ".join(sorted(known)) or "none defined"
        problem(field, f"{unknown[0]!r} in {text!r} is not a {kind} (known: {names})")


def _check_launch(launch: LaunchSpec, workload: Workload, known: set[str], field: str, problem: Any) -> None:
    for key in ("grid", "block"):
        for axis, item in enumerate(getattr(launch, key)):
            _check_names_in(item, known, f"{field}.{key}[{axis}]", "size variable or knob", problem)
    _check_names_in(launch.shared_mem, known, f"{field}.shared_mem", "size variable or knob", problem)
    case_names = {case.name for case in workload.cases}
    for case_name, override in launch.cases.items():
        if case_name not in case_names:
            problem(f"{field}.cases.{case_name}", f"there is no case named {case_name!r}")
        for key in ("grid", "block"):
            for axis, item in enumerate(getattr(override, key) or []):
                _check_names_in(
                    item, known, f"{field}.cases.{case_name}.{key}[{axis}]", "size variable or knob", problem
                )
        if override.shared_mem is not None:
            _check_names_in(
                override.shared_mem,
                known,
                f"{field}.cases.{case_name}.shared_mem",
                "size variable or knob",
                problem,
            )


def _check_kernel(kernel: KernelSource, workload: Workload, field: str, problem: Any) -> None:
    if kernel.source is not None:
        path = workload.base_dir / kernel.source
        if not path.is_file():
            problem(f"{field}.source", f"kernel file {path} does not exist")
            return
        source, label = path.read_text(), kernel.source
    else:
        source, label = kernel.code or "", "inline code"
    declaration = find_kernel(source, kernel.entry)
    if declaration is None:
        problem(f"{field}.entry", f"no __global__ function named {kernel.entry!r} in {label}")
        return
    expected = len(workload.signature)
    if len(declaration.parameters) != expected:
        problem(
            f"{field}.entry",
            f"{label}:{declaration.line}: kernel {declaration.name!r} takes "
            f"{len(declaration.parameters)} parameters but the signature lists {expected}",
        )
        return
    for index, (declared, parameter) in enumerate(
        zip(declaration.parameters, workload.signature, strict=True)
    ):
        if declared.is_pointer != parameter.is_pointer:
            kind = "a pointer" if declared.is_pointer else "a scalar"
            problem(
                f"signature[{index}].type",
                f"{label}:{declaration.line}: parameter {index + 1} of {declaration.name!r} is {kind} "
                f"({declared.text!r}) but the signature says {parameter.type!r}",
            )


def _check_callable(reference: Any, base_dir: Path, field: str, problem: Any, run: bool = True) -> None:
    """Check a named function exists; ``run=False`` checks without importing (baselines need CuPy)."""
    if callable(reference):
        return
    try:
        if run:
            resolve_callable(reference, base_dir)
            return
        location, function = split_reference(reference)
        if location.endswith(".py") or "/" in location:
            path = base_dir / location
            if not path.is_file():
                raise CallableNotFound(f"file {path.resolve()} does not exist")
            tree = ast.parse(path.read_text(), str(path))
            defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)}
            if function.split(".")[0] not in defined:
                raise CallableNotFound(f"{location} defines no function {function!r}")
        elif importlib.util.find_spec(location) is None:
            raise CallableNotFound(f"module {location!r} cannot be found")
    except CallableNotFound as exc:
        problem(field, str(exc))
    except Exception as exc:  # the user's module failed while importing
        problem(field, f"importing {reference!r} failed: {type(exc).__name__}: {exc}")


def _split_field(field: str) -> list[str]:
    return [part for part in field.replace("[", ".").replace("]", "").split(".") if part]


def _pydantic_problems(exc: ValidationError, document: SpecDocument) -> list[SpecProblem]:
    problems = []
    for error in exc.errors():
        path = _data_path(document.data, error["loc"])
        field = _format_path(path)
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            allowed = _allowed_fields(path[:-1])
            message = f"unknown field {path[-1]!r}" + (
                f" (expected one of: {', '.join(allowed)})" if allowed else ""
            )
        elif error["type"] == "missing":
            message = "missing required field"
        problems.append(SpecProblem(field, message, document.line_of(path)))
    return problems


def _data_path(data: Any, loc: tuple[Any, ...]) -> tuple[str | int, ...]:
    """Keep the parts of a pydantic location that walk the data (drop union-member tags)."""
    path: list[str | int] = []
    node = data
    for part in loc:
        in_dict = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if in_dict or in_list:
            node = node[part]
            path.append(part)
        elif isinstance(node, dict) and isinstance(part, str) and "[" not in part and "-" not in part:
            path.append(part)  # a missing field: name it
            node = None
    return tuple(path)


def _format_path(path: tuple[str | int, ...]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _allowed_fields(path: tuple[str | int, ...]) -> list[str]:
    model: Any = Workload
    for part in path:
        if isinstance(part, int):
            continue
        model = _field_model(model, part)
        if model is None:
            return []
    return list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


def _field_model(model: Any, name: str) -> Any:
    if isinstance(model, type) and issubclass(model, BaseModel):
        field = model.model_fields.get(name)
        return None if field is None else _unwrap(field.annotation)
    return None


def _unwrap(annotation: Any) -> Any:
    while True:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return annotation
        args = get_args(annotation)
        if not args:
            return annotation
        origin = get_origin(annotation)
        candidates = [a for a in args if a is not type(None)]
        if origin is dict:
            candidates = [args[-1]]
        models = [a for a in candidates if isinstance(a, type) and issubclass(a, BaseModel)]
        annotation = models[0] if models else candidates[0] if len(candidates) == 1 else None
        if annotation is None:
            return None
