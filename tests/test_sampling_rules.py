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
