"""Fast mode's path choice: the candidates per CPU kind, the choice by measurement (the fastest path that passes the
fidelity gate; a path that cannot be built, or fails the gate, passed over), the choice remembered per CPU, and the
configured override; and, on the real model, every path through the fidelity gate."""

import json
from pathlib import Path

import numpy as np
import pytest

from lodex.encoders.cpu import parse_cpuinfo
from lodex.encoders.errors import ModelError
from lodex.encoders.fast_paths import ALL_PATHS, FastPath, candidates, choose, parse_path, remember, remembered
from lodex.store.errors import ConfigError

ZEN3 = parse_cpuinfo("model name : AMD EPYC 7763\nflags : avx2 fma\nprocessor : 0\ncore id : 0\nprocessor : 1\ncore id : 1\n", 2, "x86_64")
ICELAKE = parse_cpuinfo("model name : Intel Xeon 8375C\nflags : avx2 fma avx512f avx512bw avx512_vnni\n", 2, "x86_64")
GRAVITON = parse_cpuinfo("Features : fp asimd asimddp i8mm\n", 4, "aarch64")
ONE_CORE = parse_cpuinfo("model name : small\nflags : avx2 fma avx_vnni\n", 1, "x86_64")


def test_candidates_follow_the_int8_kernel_and_the_cores() -> None:
    names = lambda cpu, scheme=None: [p.name for p in candidates(cpu, scheme)]  # noqa: E731
    assert names(ICELAKE) == ["int8", "int8-sessions"]  # VNNI adds into int32: 7-bit weights would only lose precision
    assert names(GRAVITON) == ["int8", "int8-sessions"]
    assert names(ZEN3) == ["int8", "int8-sessions", "int8r7", "int8r7-sessions"]  # vpmaddubsw may saturate: 7 bits measured too
    assert names(ONE_CORE) == ["int8"]  # one core: nothing to run in parallel
    # an index keeps its scheme: only paths of the weights it was built with
    assert names(ZEN3, "int8-sq75-r7") == ["int8r7", "int8r7-sessions"]
    assert names(ICELAKE, "int8-sq75-r7") == ["int8r7", "int8r7-sessions"]  # an index made on an AVX2 machine, moved
    assert names(ICELAKE, "int8-sq75") == ["int8", "int8-sessions"] and names(ICELAKE, "int8-sq50") == []
    assert {p.scheme for p in ALL_PATHS} == {"int8-sq75", "int8-sq75-r7"}


def test_the_fastest_faithful_path_is_chosen() -> None:
    times = {"int8": 1.0, "int8-sessions": 0.8, "int8r7": 0.7, "int8r7-sessions": 0.69}
    chosen, trials = choose(ALL_PATHS, lambda p: (0.997, 0.99, times[p.name]))
    assert chosen.name == "int8r7" and [t.path for t in trials] == [p.name for p in ALL_PATHS]
    # within the margin of an earlier path: the earlier (preferred) one stays
    chosen, _ = choose(ALL_PATHS[:2], lambda p: (0.997, 0.99, {"int8": 1.0, "int8-sessions": 0.97}[p.name]))
    assert chosen.name == "int8"


def test_a_preferred_path_that_is_unavailable_or_unfaithful_is_passed_over() -> None:
    def measure(path: FastPath) -> tuple[float, float, float]:
        if path.layout == "sessions":
            raise RuntimeError("ONNX Runtime cannot open a second session here\nsecond line")
        if path.weights == "int8":  # saturated sums: far from PyTorch
            return 0.93, 0.62, 0.1
        return 0.996, 0.99, 0.5

    chosen, trials = choose(candidates(ZEN3), measure)
    assert chosen.name == "int8r7"
    reasons = {t.path: t.error for t in trials}
    assert "below the gate" in reasons["int8"] and reasons["int8-sessions"] == "RuntimeError: ONNX Runtime cannot open a second session here"
    assert reasons["int8r7"] is None
    with pytest.raises(ModelError) as caught:
        choose(candidates(ICELAKE), lambda p: (0.95, 0.9, 0.1))
    assert "no faithful int8 path" in caught.value.message and "int8-sessions: cosine" in caught.value.message
    assert 'precision = "exact"' in caught.value.fix
    with pytest.raises(ModelError, match="no path for this CPU"):
        choose([], lambda p: (1.0, 1.0, 1.0))


def test_the_choice_is_remembered_per_cpu_and_candidates(tmp_path: Path) -> None:
    paths = candidates(ZEN3)
    assert remembered(tmp_path, "f" * 20, ZEN3, paths) is None
    chosen, trials = choose(paths, lambda p: (0.997, 0.99, 0.5 if p.name == "int8-sessions" else 1.0))
    remember(tmp_path, "f" * 20, ZEN3, paths, chosen, trials)
    assert remembered(tmp_path, "f" * 20, ZEN3, paths) == FastPath("int8", "sessions")
    assert remembered(tmp_path, "f" * 20, ICELAKE, candidates(ICELAKE)) is None  # another CPU measures again
    assert remembered(tmp_path, "f" * 20, ZEN3, paths[2:]) is None  # other candidates (an index's scheme) too
    assert remembered(tmp_path, "e" * 20, ZEN3, paths) is None  # another model
    [choice_file] = tmp_path.glob("ffff*-fast-path.json")
    choice_file.write_text("{not json")
    assert remembered(tmp_path, "f" * 20, ZEN3, paths) is None  # unreadable: measured again, never an error
    remember(tmp_path / "file-not-dir.json" / "x", "f" * 20, ZEN3, paths, chosen, trials)  # unwritable: silently not kept


def test_a_configured_path_is_parsed_or_refused() -> None:
    assert parse_path("int8r7-sessions") == FastPath("int8r7", "sessions")
    with pytest.raises(ConfigError) as caught:
        parse_path("int4")
    assert "int8-sessions" in caught.value.fix and "auto" in caught.value.fix


@pytest.mark.slow
def test_every_path_passes_the_fidelity_gate_on_real_text(real_encoder, fast_cache: Path) -> None:
    """Each path, configured (encoder.fast_path), gives vectors within the gate of exact ones on real chunks, records its
    scheme, and the same path in the other layout gives the same vectors (on every 4th chunk)."""
    from lodex.encoders.settings import EncoderSettings
    from lodex.encoders.transformers_encoder import TransformersEncoder
    from tests.test_fast_mode import _real_chunks

    texts = _real_chunks(real_encoder, per_collection=25)  # ~200 chunks (test_fast_mode checks the default path on ~400)
    exact = real_encoder.embed(texts)
    vectors, means = {}, {}
    for path in ALL_PATHS:
        # the run's cache (this CPU's default scheme exported there once per run; the other scheme is exported here)
        encoder = TransformersEncoder(EncoderSettings(precision="fast", fast_path=path.name, cache_dir=str(fast_cache)))
        assert encoder.fast_path == path and encoder.origin()["quantization"] == path.scheme
        assert f"fast path {path.name} (configured)" in encoder.runtime()
        # the "sessions" layout runs the same model as its weights' "threads" path: every 4th chunk (of all three
        # collections) shows it gives the same vectors, batches in parallel
        some = slice(None) if path.layout == "threads" else slice(None, None, 4)
        vectors[path.name] = encoder.embed(texts[some])
        cosines = (vectors[path.name] * exact[some]).sum(axis=1)
        assert cosines.mean() >= 0.99 and cosines.min() >= 0.95, (path.name, cosines.mean(), cosines.min())
        means[path.name] = float(cosines.mean())
        if path.layout == "sessions":
            assert encoder._pool is not None and len(encoder._pool.models) == encoder._threads
            assert np.allclose(vectors[path.name], vectors[path.weights][some], atol=1e-5)
    print(json.dumps(means))
