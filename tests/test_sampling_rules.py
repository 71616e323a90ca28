"""The sampling stop rule and batch sizing shared by the backends (no device needed)."""

from kernelopt_jupyter.backends.base import enough_samples, next_batch_size
from kernelopt_jupyter.core.settings import TimingProtocol

SCREEN = TimingProtocol(warmup=1, samples=3, max_samples=20, budget_s=0.01, target_cv=None)


def test_the_minimum_count_comes_first_whatever_the_budget():
    assert next_batch_size([], SCREEN, elapsed_s=0.0, sample_us=1000.0) == 3
    assert not enough_samples([1.0, 1.0], SCREEN, elapsed_s=0.05)
    assert enough_samples([1.0, 1.0], SCREEN, elapsed_s=0.2), "ten times over budget stops a slow kernel"


def test_a_batch_past_the_minimum_is_what_the_budget_left_pays_for():
    three_ms = [1000.0] * 3
    assert next_batch_size(three_ms, SCREEN, elapsed_s=0.003, sample_us=1000.0) == 8
    assert next_batch_size(three_ms, SCREEN, elapsed_s=0.0099, sample_us=1000.0) == 1
    assert next_batch_size(three_ms, SCREEN, elapsed_s=0.003, sample_us=1.0) == 17, "capped by max_samples"


def test_without_a_budget_batches_keep_their_usual_size_and_the_queue_cap():
    fixed = TimingProtocol(warmup=1, samples=10, max_samples=1000, budget_s=None, target_cv=0.001)
    assert next_batch_size([1.0] * 10, fixed, elapsed_s=5.0, sample_us=1.0) == 25
    deep = fixed.model_copy(update={"samples": 500})
    assert next_batch_size([], deep, elapsed_s=0.0, sample_us=1.0, launches=20) == 200 // 22
    assert next_batch_size([], deep, elapsed_s=0.0, sample_us=1.0, launches=50) == 3


def test_noise_under_target_stops_and_the_budget_stops_the_rest():
    protocol = TimingProtocol(warmup=1, samples=3, budget_s=1.0, target_cv=0.005)
    assert enough_samples([10.0, 10.0, 10.01], protocol, elapsed_s=0.01)
    noisy = [10.0, 12.0, 9.0]
    assert not enough_samples(noisy, protocol, elapsed_s=0.5)
    assert enough_samples(noisy, protocol, elapsed_s=1.0)


def test_auto_is_a_graph_from_ten_microseconds_and_back_to_back_below_or_cold():
    from kernelopt_jupyter.backends.base import GRAPH_MIN_US, resolve_mode

    auto = TimingProtocol()
    assert auto.mode == "auto", "the default"
    assert resolve_mode(auto, GRAPH_MIN_US) == "graph"
    assert resolve_mode(auto, 27.0) == "graph"
    assert resolve_mode(auto, 5.0) == "back_to_back"
    assert resolve_mode(auto, None) == "back_to_back", "before a warm-up, nothing suggests a graph"
    assert resolve_mode(auto.model_copy(update={"cache": "cold"}), 300.0) == "back_to_back"
    for named in ("per_launch", "back_to_back", "graph"):
        assert resolve_mode(TimingProtocol(mode=named), 5.0) == named, "a mode asked by name stays"


def test_baselines_and_the_screen_time_auto_back_to_back():
    from kernelopt_jupyter.agent.sweep import screen_protocol
    from kernelopt_jupyter.worker.baseline import baseline_protocol

    assert baseline_protocol(TimingProtocol()).mode == "back_to_back"
    assert baseline_protocol(TimingProtocol(mode="graph")).mode == "graph"
    assert baseline_protocol(None) is None
    assert screen_protocol(TimingProtocol()).mode == "back_to_back"
    assert screen_protocol(TimingProtocol(mode="graph")).mode == "graph"


class _ModeBackend:
    """Stands in for a device: under ``auto`` the first kernel settles on graph, the second on
    back-to-back (as a kernel that cannot be captured would); a named mode is used as asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, str]] = []

    def time(self, run, request, *, prepare=None, timeout_s=10.0):
        from kernelopt_jupyter.backends.base import TimingSamples

        kernel = run()
        self.asked.append((kernel, request.mode))
        mode = request.mode if request.mode != "auto" else ("graph", "back_to_back")[kernel]
        return TimingSamples([10.0] * request.samples, request.warmup, mode=mode)


class _Runner:
    def __init__(self) -> None:
        self.backend = _ModeBackend()

    def timing_buffers(self, case):
        return {}, None


def test_interleaved_kernels_that_settle_auto_differently_are_all_timed_back_to_back():
    from kernelopt_jupyter.worker.runner import interleaved_timings

    runner = _Runner()
    invokers = [lambda case, buffers: 0, lambda case, buffers: 1]
    protocol = TimingProtocol.fixed(1, 40)
    stats = interleaved_timings(runner, invokers, None, protocol, rounds=4, timeout_s=1.0)
    assert [s.mode for s in stats] == ["back_to_back, interleaved"] * 2
    assert [s.samples for s in stats] == [40, 40], "the mixed first round is not counted"
    assert runner.backend.asked[:2] == [(0, "auto"), (1, "auto")]
    assert all(mode == "back_to_back" for _, mode in runner.backend.asked[2:])
    assert len(runner.backend.asked) == 2 + 2 * 4
