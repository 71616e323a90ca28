"""Print the hottest functions of the profiles ``gpu_batch.sh profile`` wrote (parent and workers).

python benchmarks/print_profile.py DIR [--top N]
"""

from __future__ import annotations

import argparse
import io
import pstats
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--top", type=int, default=18)
    args = parser.parse_args()
    for path in sorted(args.directory.glob("*.prof")):
        for order in ("tottime", "cumulative"):
            text = io.StringIO()
            stats = pstats.Stats(str(path), stream=text)
            stats.strip_dirs().sort_stats(order).print_stats(args.top)
            lines = [line for line in text.getvalue().splitlines() if line.strip()]
            start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
            print(f"== {path.name} by {order} (total {stats.total_tt:.2f} s)")  # type: ignore[attr-defined]
            print("\n".join(line[:150] for line in lines[start:]))


if __name__ == "__main__":
    main()
