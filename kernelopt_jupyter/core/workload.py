"""The workload model: what kernel to optimize, on which cases, checked against what.

These pydantic models are both the file format (YAML/JSON, see ``docs/workload-format.md``) and the
Python objects the rest of the package works with. Unknown fields are rejected so that a typo in a
spec fails loudly instead of being silently ignored. Cross-field checks (shapes naming known
variables, the kernel's parameter count, ...) live in :mod:`kernelopt_jupyter.core.loader`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from .callables import callable_reference
from .expressions import Number, parse_condition, parse_expression
from .types import ParamType, parse_type

ExpressionText = str | int | float
CallableRef = str | Callable[..., Any]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


def _check_expression(value: ExpressionText) -> ExpressionText:
    parse_expression(value)
    return value


# An expression checked where it stands, so an error points at the exact list item.
Expression = Annotated[ExpressionText, AfterValidator(_check_expression)]


class InputSpec(_Strict):
    """How one input is drawn: a named distribution, or a Python generator function.

    A generator is called as ``generator(rng, shape, dtype, sizes)`` and returns the array.
    """

    distribution: Literal["uniform", "normal", "integers", "ones", "zeros", "constant"] | None = None
    low: float | None = None
    high: float | None = None
    mean: float = 0.0
    std: float = 1.0
    value: float | None = None
    generator: CallableRef | None = None

    @model_validator(mode="after")
    def _one_source(self) -> InputSpec:
        if (self.distribution is None) == (self.generator is None):
            raise ValueError("give exactly one of 'distribution' or 'generator'")
        if self.distribution == "constant" and self.value is None:
            raise ValueError("the constant distribution needs 'value'")
        if self.low is not None and self.high is not None and self.low >= self.high:
            raise ValueError(f"'low' ({self.low}) must be below 'high' ({self.high})")
        return self


class Tolerance(_Strict):
    """Elementwise ``|got - want| <= atol + rtol * |want|`` and a bound on ``‖got - want‖ / ‖want‖``."""

    rtol: float = Field(1e-5, ge=0)
    atol: float = Field(1e-6, ge=0)
    max_rel_norm: float | None = Field(1e-5, ge=0)


class Parameter(_Strict):
    """One kernel parameter, in signature order."""

    name: str
    type: str
    role: Literal["in", "out", "inout"] | None = None
    shape: list[Expression] | None = None
    value: Expression | None = None
    input: InputSpec | None = None
    tolerance: Tolerance | None = None
    order_dependent: bool = False

    _parsed: ParamType = PrivateAttr()

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        parse_type(value)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Parameter:
        self._parsed = parse_type(self.type)
        if self._parsed.pointer:
            if self.role is None:
                if not self._parsed.const:
                    raise ValueError("a non-const pointer needs a 'role' (in, out or inout)")
                self.role = "in"
            if not self.shape:
                raise ValueError("a pointer parameter needs a 'shape' (a list of expressions)")
            if self.value is not None:
                raise ValueError("'value' is for scalars; a pointer gets 'input' or is an output")
            if self._parsed.const and self.role != "in":
                raise ValueError(f"a const pointer cannot have role {self.role!r}")
        else:
            if self.role not in (None, "in"):
                raise ValueError("a scalar parameter is always an input; drop 'role'")
            if self.shape:
                raise ValueError("a scalar parameter has no 'shape'")
            self.role = "in"
        if self.role == "out" and self.input is not None:
            raise ValueError("an 'out' parameter is written by the kernel and takes no 'input'")
        return self

    @property
    def param_type(self) -> ParamType:
        return self._parsed

    @property
    def is_pointer(self) -> bool:
        return self._parsed.pointer

    @property
    def is_output(self) -> bool:
        return self.role in ("out", "inout")


class Case(_Strict):
    """A set of size variables. Correctness cases gate ranking; performance cases are also timed.

    ``emulation_sizes`` replaces ``sizes`` on the CPU emulation backend, where GPU-sized problems
    would take minutes.
    """

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    kind: Literal["correctness", "performance"] = "correctness"
    sizes: dict[str, int]
    emulation_sizes: dict[str, int] | None = None

    def sizes_for(self, emulated: bool) -> dict[str, int]:
        if emulated and self.emulation_sizes:
            return {**self.sizes, **self.emulation_sizes}
        return dict(self.sizes)


class LaunchOverride(_Strict):
    grid: list[Expression] | None = Field(None, min_length=1, max_length=3)
    block: list[Expression] | None = Field(None, min_length=1, max_length=3)
    shared_mem: Expression | None = None


class LaunchSpec(LaunchOverride):
    """Grid, block and dynamic shared memory as expressions; ``cases`` overrides them per case."""

    grid: list[Expression] = Field(min_length=1, max_length=3)
    block: list[Expression] = Field(min_length=1, max_length=3)
    shared_mem: Expression = 0
    cases: dict[str, LaunchOverride] = Field(default_factory=dict)


class KernelSource(_Strict):
    """A CUDA source given by path (relative to the spec file) or inline, and its entry point.

    ``entry`` is the ``__global__`` function's name, or a name expression for a template
    (``sgemm<64, 8>``).
    """

    source: str | None = None
    code: str | None = None
    entry: str
    options: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_source(self) -> KernelSource:
        if (self.source is None) == (self.code is None):
            raise ValueError("give exactly one of 'source' (a .cu path) or 'code' (inline CUDA)")
        return self


class CudaReference(KernelSource):
    launch: LaunchSpec


class ReferenceSpec(_Strict):
    """A NumPy reference (``file.py:function`` or a callable) or a CUDA reference kernel."""

    python: CallableRef | None = None
    cuda: CudaReference | None = None

    @model_validator(mode="after")
    def _one(self) -> ReferenceSpec:
        if (self.python is None) == (self.cuda is None):
            raise ValueError("give exactly one of 'python' or 'cuda'")
        return self


class WorkModel(_Strict):
    """Floating-point operations and the fewest bytes moved, per case, for throughput and roofline."""

    flops: Expression | None = None
    bytes: Expression | None = None


class BaselineSpec(_Strict):
    """A vendor or library implementation timed beside the candidates (e.g. ``cupy.matmul``).

    Called as ``baseline(**parameters)`` with device arrays; it writes the outputs in place or
    returns them (one array, a tuple in output order, or a dict by name).
    """

    python: CallableRef
    name: str = "baseline"


def _number_or_text(item: int | float | str) -> int | float | str:
    """YAML 1.1 reads ``1e-5`` as text; a knob value that spells a number is that number."""
    if isinstance(item, str):
        for convert in (int, float):
            try:
                return convert(item)
            except ValueError:
                continue
    return item


class TuningSpace(_Strict):
    """Knobs (passed as ``-D`` defines, usable in launch expressions) and restrictions on them."""

    knobs: dict[str, list[int | float | str]] = Field(default_factory=dict)
    restrictions: list[str] = Field(default_factory=list)

    @field_validator("knobs")
    @classmethod
    def _non_empty(cls, value: dict[str, list[int | float | str]]) -> dict[str, list[int | float | str]]:
        for name, values in value.items():
            if not name.isidentifier():
                raise ValueError(f"knob name {name!r} is not an identifier")
            if not values:
                raise ValueError(f"knob {name!r} has no values")
            value[name] = [_number_or_text(item) for item in values]
        return value

    @field_validator("restrictions")
    @classmethod
    def _conditions(cls, value: list[str]) -> list[str]:
        for item in value:
            parse_condition(item)
        return value


class Workload(_Strict):
    """Everything needed to evaluate a candidate kernel, independent of any backend."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    kernel: KernelSource
    signature: list[Parameter] = Field(min_length=1)
    cases: list[Case] = Field(min_length=1)
    launch: LaunchSpec
    reference: ReferenceSpec
    tolerance: Tolerance = Field(default_factory=Tolerance)
    work: WorkModel | None = None
    baseline: BaselineSpec | None = None
    tuning: TuningSpace | None = None

    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)
    _warnings: list[str] = PrivateAttr(default_factory=list)
    _spec_path: str = PrivateAttr(default="<python>")

    @property
    def base_dir(self) -> Path:
        """The directory relative paths in the spec are resolved against."""
        return self._base_dir

    @property
    def warnings(self) -> list[str]:
        """What the loader found suspicious but not wrong (see ``core.loader.spec_warnings``)."""
        return self._warnings

    @property
    def spec_path(self) -> str:
        return self._spec_path

    def bind_location(self, spec_path: str, base_dir: Path) -> Workload:
        self._spec_path = spec_path
        self._base_dir = base_dir
        return self

    def parameter(self, name: str) -> Parameter:
        for parameter in self.signature:
            if parameter.name == name:
                return parameter
        raise KeyError(name)

    @property
    def outputs(self) -> list[Parameter]:
        return [p for p in self.signature if p.is_output]

    @property
    def performance_cases(self) -> list[Case]:
        return [case for case in self.cases if case.kind == "performance"]

    def case(self, name: str) -> Case:
        for case in self.cases:
            if case.name == name:
                return case
        raise KeyError(name)

    def tolerance_for(self, parameter: Parameter) -> Tolerance:
        return parameter.tolerance or self.tolerance

    def size_variables(self) -> set[str]:
        return set(self.cases[0].sizes)

    def knob_names(self) -> set[str]:
        return set(self.tuning.knobs) if self.tuning else set()

    def kernel_code(self) -> str:
        return read_source(self.kernel, self.base_dir)

    def portable_dict(self) -> dict[str, Any]:
        """The workload as plain JSON data another process can rebuild it from.

        Callables become importable ``module:function`` / absolute ``file.py:function`` names and
        source files become inline code, so the result does not depend on the current directory.
        """
        data = self.model_dump(mode="python")
        data["kernel"]["code"], data["kernel"]["source"] = self.kernel_code(), None
        if self.reference.python is not None:
            data["reference"]["python"] = callable_reference(self.reference.python, self.base_dir)
        if self.reference.cuda is not None:
            data["reference"]["cuda"]["code"] = read_source(self.reference.cuda, self.base_dir)
            data["reference"]["cuda"]["source"] = None
        if self.baseline is not None:
            data["baseline"]["python"] = callable_reference(self.baseline.python, self.base_dir)
        for parameter, dumped in zip(self.signature, data["signature"], strict=True):
            if parameter.input is not None and parameter.input.generator is not None:
                dumped["input"]["generator"] = callable_reference(parameter.input.generator, self.base_dir)
        return data


def read_source(kernel: KernelSource, base_dir: Path) -> str:
    if kernel.code is not None:
        return kernel.code
    assert kernel.source is not None
    return (base_dir / kernel.source).read_text()


def scalar_value(parameter: Parameter, variables: Mapping[str, Number]) -> Number:
    """A scalar's value for a case: its ``value`` expression, else the size variable of its name."""
    expression = parameter.value if parameter.value is not None else parameter.name
    return parse_expression(expression)(variables)
