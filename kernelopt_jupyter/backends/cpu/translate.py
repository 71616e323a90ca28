"""Turning a candidate's CUDA C++ source into a host C++ translation unit for the CPU emulation.

Three jobs, all line-preserving so the compiler's messages (through ``#line``) point at the
candidate's own lines: refuse constructs the emulation cannot run with one clear message; rewrite
``__shared__`` declarations into references to per-block storage owned by the fiber runtime; and
append a launcher that exports the entry kernel under a fixed name.

We do not parse C++: the scans work on the source with comments and string literals blanked out
(positions unchanged), which is enough for the declaration forms CUDA code uses in practice.
Anything unusual is refused with its line rather than guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...core.cuda_source import split_top_level, strip_comments

LAUNCHER_FILE = "kernelopt-launcher"
PRELUDE = "kocpu_prelude.h"
# The host's C headers define these macros but NVRTC does not: a kernel using them would compile
# here and fail on the GPU, so they are withdrawn before the candidate's code.
_NVRTC_HAS_NO = "#undef INFINITY\n#undef NAN\n"


class TranslationError(Exception):
    """A construct the CPU emulation does not support, with the candidate line it is on."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


_UNSUPPORTED: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(?:asm|__asm__|__asm)\b\s*(?:volatile\b|__volatile__\b)?\s*\("), "inline PTX (asm)"),
    (
        re.compile(
            r"\bwmma\s*::|\bnvcuda\b|\b(?:mma_sync|load_matrix_sync|store_matrix_sync)\b|\b__[hi]mma\w*"
        ),
        "tensor-core matrix operations (wmma / mma)",
    ),
    (
        re.compile(r"\b__pipeline_\w+|\bcp\.async\b|\bmemcpy_async\b|\bcuda\s*::\s*pipeline\b"),
        "asynchronous copies (cp.async / __pipeline_* / memcpy_async)",
    ),
    (
        re.compile(r"\b__nv_bfloat16\w*|\b__float2bfloat16\w*|\b__bfloat162float\b"),
        "bfloat16 (__nv_bfloat16)",
    ),
    (
        re.compile(r"\b__half2?\b|\b__nv_half\w*|\b__float2half\w*|\b__half2float\b|\b__floats2half2\w*"),
        "half precision (__half)",
    ),
    (
        re.compile(
            r"\btex[123]D\w*\s*[<(]|\btex1Dfetch\b|\btexture\s*<|\bcudaTextureObject_t\b|"
            r"\bsurf[123]D\w*\s*[<(]|\bcudaSurfaceObject_t\b"
        ),
        "textures and surfaces",
    ),
    (re.compile(r"<<<"), "kernel launches inside device code (dynamic parallelism, <<<...>>>)"),
    (
        re.compile(
            r"\b(?:this_grid|grid_group|this_multi_grid|multi_grid_group|this_cluster|cluster_group)\b"
        ),
        "grid-wide cooperative groups (this_grid / grid_group)",
    ),
    (re.compile(r"\b__cluster_dims__\b|\bclusterDim\b|\bcluster_sync\b"), "thread block clusters"),
    (re.compile(r"\bcub\s*::"), "CUB"),
    (re.compile(r"\bthrust\s*::"), "Thrust"),
    (re.compile(r"\bcuda\s*::\s*(?:std\s*::\s*)?\w+"), "libcu++ (cuda::)"),
    (re.compile(r"\bcurand\w*\s*\("), "the cuRAND device API"),
    (
        re.compile(
            r"\bcuda(?:Malloc|Memcpy|Memset|Free|DeviceSynchronize|Launch\w*|GetLastError|StreamCreate)\w*\s*\("
        ),
        "CUDA runtime API calls in device code",
    ),
    (
        re.compile(r"\b__(?:shfl|shfl_up|shfl_down|shfl_xor|ballot|any|all)\s*\("),
        "warp intrinsics without _sync (removed in CUDA 9; use __shfl_sync, __ballot_sync, ...)",
    ),
]

# Headers the prelude stands in for: their #include lines become blank lines.
_PROVIDED_HEADERS = re.compile(
    r"^(?:cuda_runtime(?:_api)?\.h|cuda\.h|device_launch_parameters\.h|device_functions\.h|"
    r"device_atomic_functions\.h|vector_types\.h|vector_functions\.h|math_constants\.h|math_functions\.h|"
    r"cuda_device_runtime_api\.h|sm_\d+_(?:intrinsics|atomic_functions)\.h|crt/.*|cassert|assert\.h|"
    r"cooperative_groups\.h|cooperative_groups/(?:reduce|scan)\.h)$"
)
_UNSUPPORTED_HEADERS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^cuda_fp16\.h"), "half precision (cuda_fp16.h)"),
    (re.compile(r"^cuda_bf16\.h"), "bfloat16 (cuda_bf16.h)"),
    (re.compile(r"^mma\.h"), "tensor-core matrix operations (mma.h)"),
    (re.compile(r"^cooperative_groups/"), "this part of cooperative groups"),
    (re.compile(r"^cuda_pipeline|^cuda/(?:pipeline|barrier)"), "asynchronous copies (cuda_pipeline.h)"),
    (re.compile(r"^cub/"), "CUB"),
    (re.compile(r"^thrust/"), "Thrust"),
    (re.compile(r"^curand"), "the cuRAND device API"),
    (re.compile(r"^cuda/"), "libcu++ (cuda/...)"),
]
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]+)[>\"][^\n]*", re.M)
_ENTRY = re.compile(r"^\s*(?:::)?[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*\s*(?:<[^;{}]*>)?\s*$")


@dataclass
class SharedDeclaration:
    """One ``__shared__`` variable as written: its element type text, name and array dimensions."""

    line: int
    name: str
    type_text: str
    dims: list[str]
    pointer: bool
    extern: bool
    start: int
    align: str | None = None


@dataclass
class Translation:
    """The host C++ translation unit and what the scans learned on the way."""

    text: str
    stripped: str
    shared: list[SharedDeclaration] = field(default_factory=list)


def line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def check_supported(source: str, stripped: str) -> None:
    """Raise :class:`TranslationError` for the first construct (in source order) we cannot run."""
    found: list[tuple[int, str]] = []
    for match in _INCLUDE.finditer(source):
        if not stripped[match.start() : match.end()].lstrip().startswith("#"):
            continue  # inside a comment
        header = match.group(1).strip()
        if _PROVIDED_HEADERS.match(header):
            continue
        for pattern, what in _UNSUPPORTED_HEADERS:
            if pattern.search(header):
                found.append((match.start(), what))
                break
    for pattern, what in _UNSUPPORTED:
        match = pattern.search(stripped)
        if match is not None:
            found.append((match.start(), what))
    if found:
        position, what = min(found)
        raise TranslationError(line_of(source, position), f"{what} is not supported by the CPU emulation")


def blank_provided_includes(source: str, stripped: str) -> str:
    """Blank the #include lines of CUDA headers the prelude replaces (keeping the line count)."""

    def replace(match: re.Match[str]) -> str:
        in_code = stripped[match.start() : match.end()].lstrip().startswith("#")
        return "" if in_code and _PROVIDED_HEADERS.match(match.group(1).strip()) else match.group(0)

    return _INCLUDE.sub(replace, source)


def _code_braces(stripped: str) -> list[tuple[int, int, bool]]:
    """Every brace pair as (open, close, is_code): code if a function body or nested in one."""
    pairs: list[tuple[int, int, bool]] = []
    stack: list[tuple[int, bool]] = []
    for index, char in enumerate(stripped):
        if char == "{":
            back = index - 1
            while back >= 0 and stripped[back].isspace():
                back -= 1
            word = re.search(r"\w+$", stripped[max(0, back - 15) : back + 1])
            code = (
                bool(stack and stack[-1][1])
                or (back >= 0 and stripped[back] in ")]")
                or bool(
                    word
                    and word.group(0) in {"else", "do", "try", "noexcept", "mutable", "const", "override"}
                )
            )
            stack.append((index, code))
        elif char == "}" and stack:
            start, code = stack.pop()
            pairs.append((start, index, code))
    return pairs


def _in_function(pairs: list[tuple[int, int, bool]], position: int) -> bool:
    return any(code and start < position < end for start, end, code in pairs)


def _statement_bounds(stripped: str, keyword_at: int) -> tuple[int, int]:
    """Start of the statement holding ``__shared__`` and the index of its terminating ``;``."""
    start = keyword_at
    while start > 0 and stripped[start - 1] not in ";{}":
        start -= 1
    # A preprocessor line (e.g. #pragma) before the declaration ends the search too.
    for match in re.finditer(r"^[ \t]*#[^\n]*\n", stripped[start:keyword_at], re.M):
        start = max(start, start + match.end())
    depth = 0
    for index in range(keyword_at, len(stripped)):
        char = stripped[index]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth < 0:
                break
        elif char == ";" and depth == 0:
            return start, index
    raise TranslationError(line_of(stripped, keyword_at), "__shared__ declaration without a terminating ';'")


_DECLARATOR = re.compile(r"(?P<ptr>[*&\s]*)(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\[\]]*\]\s*)*)$")
_ALIGN = re.compile(r"\b(?:alignas|__align__)\s*\(((?:[^()]|\([^()]*\))*)\)")
_NOT_NAMES = frozenset(
    {"float", "double", "int", "char", "short", "long", "unsigned", "signed", "bool", "volatile", "const"}
)


def _parse_shared(stripped: str, start: int, end: int, keyword_at: int) -> list[SharedDeclaration]:
    line = line_of(stripped, keyword_at)
    statement = stripped[start:end]
    if re.search(r"(?<![=!<>])=(?!=)", statement):
        raise TranslationError(
            line, "a __shared__ variable cannot have an initializer (CUDA does not allow it either)"
        )
    if "__shared__" in statement[keyword_at - start + 10 :]:
        raise TranslationError(
            line, "only one __shared__ keyword per declaration is supported by the CPU emulation"
        )
    align_match = _ALIGN.search(statement)
    extern = re.search(r"\bextern\b", statement) is not None
    body = _ALIGN.sub(lambda m: " " * len(m.group(0)), statement)
    body = re.sub(r"\b(?:__shared__|extern|static|__device__)\b", lambda m: " " * len(m.group(0)), body)
    declarations: list[SharedDeclaration] = []
    type_text = ""
    for index, (offset, part) in enumerate(split_top_level(body)):
        match = _DECLARATOR.search(part)
        if (
            match is None
            or match.group("name") in _NOT_NAMES
            or (index == 0 and not part[: match.start()].strip())
        ):
            raise TranslationError(
                line, "this form of __shared__ declaration is not supported by the CPU emulation"
            )
        if index == 0:
            type_text = " ".join(part[: match.start()].split())
        dims = re.findall(r"\[([^\[\]]*)\]", match.group("dims"))
        declarations.append(
            SharedDeclaration(
                line=line,
                name=match.group("name"),
                type_text=type_text,
                dims=[dim.strip() for dim in dims],
                pointer="*" in match.group("ptr"),
                extern=extern,
                start=start + offset + match.start("name"),
                align=align_match.group(1).strip() if align_match else None,
            )
        )
    if extern and any(not decl.dims or decl.dims[0] for decl in declarations):
        raise TranslationError(
            line, "extern __shared__ must be an array of unknown size, e.g. extern __shared__ float s[];"
        )
    return declarations


def _rewrite_shared(source: str, stripped: str, filename: str) -> tuple[str, list[SharedDeclaration]]:
    """Replace every ``__shared__`` declaration by a typedef plus a reference into block storage."""
    pairs = _code_braces(stripped)
    edits: list[tuple[int, int, str]] = []
    found: list[SharedDeclaration] = []
    for match in re.finditer(r"\b__shared__\b", stripped):
        line_start = stripped.rfind("\n", 0, match.start()) + 1
        if stripped[line_start : match.start()].lstrip().startswith("#"):
            raise TranslationError(
                line_of(stripped, match.start()),
                "__shared__ inside a macro is not supported by the CPU emulation",
            )
        start, end = _statement_bounds(stripped, match.start())
        declarations = _parse_shared(stripped, start, end, match.start())
        found.extend(declarations)
        # In place: __shared__ -> typedef, storage keywords and alignment blanked, names -> type names.
        segment = list(source[start:end])
        for word in re.finditer(rf"\b(?:extern|static|__device__)\b|{_ALIGN.pattern}", stripped[start:end]):
            segment[word.start() : word.end()] = " " * (word.end() - word.start())
        keyword = match.start() - start
        segment[keyword : keyword + 10] = "typedef   "
        for decl in sorted(declarations, key=lambda d: d.start, reverse=True):
            at = decl.start - start
            segment[at : at + len(decl.name)] = f"kocpu_shared_{decl.name}"
        function_scope = _in_function(pairs, match.start())
        tail = "".join(_reference(decl, function_scope) for decl in declarations)
        if function_scope:
            edits.append((start, end + 1, "".join(segment) + ";" + tail))
        else:
            line = line_of(stripped, end)
            macros = "".join(f"\n#define {decl.name} (::kocpu::{_accessor(decl)})" for decl in declarations)
            edits.append(
                (start, end + 1, "".join(segment) + ";" + tail + macros + f'\n#line {line} "{filename}"\n')
            )
    text = source
    for begin, stop, replacement in sorted(edits, reverse=True):
        text = text[:begin] + replacement + text[stop:]
    return text, found


def _accessor(decl: SharedDeclaration) -> str:
    type_name = f"kocpu_shared_{decl.name}"
    if decl.extern:
        return f"shared_dynamic<{type_name}>()"
    align = f", {decl.align}" if decl.align else ""
    return f"shared_static<{type_name}{align}>(kocpu_key_{decl.name}, {decl.line})"


def _reference(decl: SharedDeclaration, function_scope: bool) -> str:
    key = "" if decl.extern else f" static kocpu_shared_key kocpu_key_{decl.name};"
    if not function_scope:
        return key
    return f"{key} kocpu_shared_{decl.name}& {decl.name} = ::kocpu::{_accessor(decl)};"


def translate(source: str, entry: str, filename: str) -> Translation:
    """The translation unit the host compiler builds for ``entry`` (a kernel or template instance)."""
    if not _ENTRY.match(entry):
        raise TranslationError(
            1, f"entry {entry!r} is not a kernel name or template instance like sgemm<64, 8>"
        )
    if not source.endswith("\n"):
        source += "\n"
    stripped = strip_comments(source)
    check_supported(source, stripped)
    source = blank_provided_includes(source, stripped)
    stripped = strip_comments(source)
    quoted = filename.replace("\\", "\\\\").replace('"', '\\"')
    body, shared = _rewrite_shared(source, stripped, quoted)
    text = (
        f'#include "{PRELUDE}"\n{_NVRTC_HAS_NO}#line 1 "{quoted}"\n{body}'
        f'#line 1 "{LAUNCHER_FILE}"\n'
        f"static constexpr auto kocpu_entry_fn = ::kocpu::pick_kernel(&{entry.strip()});\n"
        "KOCPU_DEFINE_ENTRY(kocpu_entry_fn)\n"
    )
    return Translation(text=text, stripped=stripped, shared=shared)
