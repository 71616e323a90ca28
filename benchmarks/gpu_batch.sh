#!/usr/bin/env bash
# Every GPU check in one call of the device tool, so a session's scarce device time is spent once:
# the gpu test suite, then the sweep and timing-fidelity benchmarks. Short output; full logs in
# $OUT (or /tmp/kernelopt-gpu). Run from the repository root on the CUDA machine, with the wheels
# of ../shared/gpu/README.md in .whl/ (pydantic; kernel_tuner for the comparison):
#
#     bash benchmarks/gpu_batch.sh [tests|sweep|fidelity|profile ...]     (default: the first three)
#
# profile: the launch-only sweeps under cProfile, parent and worker, their hottest functions.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/kernelopt-gpu}"
mkdir -p "$out"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site:$PWD"
fi
export PYTHONUNBUFFERED=1
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(tests sweep fidelity)
status=0
for part in "${parts[@]}"; do
    started=$(date +%s)
    case "$part" in
        tests) python3 -m pytest -m gpu -q -p no:cacheprovider >"$out/tests.log" 2>&1 || status=1
               grep -E "^(FAILED|ERROR)|passed|failed" "$out/tests.log" | tail -15 ;;
        sweep) python3 benchmarks/sweep_throughput.py >"$out/sweep.log" 2>&1 || status=1
               tail -20 "$out/sweep.log" ;;
        fidelity) python3 benchmarks/timing_fidelity.py >"$out/fidelity.log" 2>&1 || status=1
                  tail -40 "$out/fidelity.log" ;;
        profile) rm -rf "$out/prof" && mkdir -p "$out/prof"
                 KERNELOPT_WORKER_PROFILE="$out/prof" python3 -m cProfile -o "$out/prof/parent.prof" \
                     benchmarks/sweep_throughput.py --only-launch >"$out/profile.log" 2>&1 || status=1
                 python3 benchmarks/print_profile.py "$out/prof" >>"$out/profile.log" 2>&1
                 tail -60 "$out/profile.log" ;;
        *) echo "unknown part: $part (tests, sweep, fidelity, profile)"; status=2 ;;
    esac
    echo "== $part: $(( $(date +%s) - started )) s"
done
exit $status
