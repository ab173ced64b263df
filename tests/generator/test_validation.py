"""Request checks: each rule names the field and the range (no model needed)."""

from __future__ import annotations

from typing import get_args

import pytest

from services.generator.backends import ENGINES
from services.generator.settings import EngineName, GeneratorSettings
from services.generator.validation import fit_max_tokens, messages_of, sampling_of
from shared.errors import InvalidArgument
from shared.proto.ragrail.v1 import common_pb2, generator_pb2

SETTINGS = GeneratorSettings(max_output_tokens=100, default_max_tokens=50, context_length=200)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"temperature": -0.1}, r"sampling\.temperature is -0\.1; use 0 \(greedy\) to 2"),
        ({"temperature": 2.5}, r"sampling\.temperature is 2\.5"),
        ({"temperature": float("nan")}, r"sampling\.temperature is nan; send a finite number"),
        ({"top_p": 0.0}, r"sampling\.top_p is 0; use more than 0, up to 1"),
        ({"top_p": 1.5}, r"sampling\.top_p is 1\.5"),
        ({"top_k": -1}, r"sampling\.top_k is -1"),
        ({"max_tokens": 0}, r"sampling\.max_tokens is 0; use 1 to 100"),
        ({"max_tokens": 101}, r"sampling\.max_tokens is 101; use 1 to 100"),
        ({"repetition_penalty": 0.0}, r"sampling\.repetition_penalty is 0"),
        ({"repetition_penalty": 2.01}, r"sampling\.repetition_penalty is 2\.01"),
        ({"stop": [""]}, r"sampling\.stop\[0\] is empty"),
        ({"stop": ["x"] * 17}, r"sampling\.stop has 17 sequences; the limit is 16"),
        ({"stop": ["ok", "y" * 201]}, r"sampling\.stop\[1\] has 201 characters"),
    ],
)
def test_out_of_range_sampling_names_the_field(fields: dict, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        sampling_of(generator_pb2.SamplingParams(**fields), SETTINGS)


def test_unset_fields_take_the_defaults_and_zero_temperature_is_greedy() -> None:
    sampling = sampling_of(generator_pb2.SamplingParams(), SETTINGS)
    assert (sampling.temperature, sampling.top_p, sampling.top_k) == (0.7, 1.0, 0)
    assert (sampling.seed, sampling.repetition_penalty, sampling.stop) == (None, 1.0, ())
    assert not sampling.greedy
    explicit = sampling_of(
        generator_pb2.SamplingParams(temperature=0, top_k=0, seed=0, max_tokens=5), SETTINGS
    )
    assert explicit.greedy and explicit.seed == 0 and explicit.max_tokens == 5


def test_max_tokens_must_fit_beside_the_prompt() -> None:
    unset = sampling_of(generator_pb2.SamplingParams(), SETTINGS)
    assert fit_max_tokens(unset, 10, 200, SETTINGS) == 50  # the default
    assert fit_max_tokens(unset, 180, 200, SETTINGS) == 20  # the default, cut to the room left
    asked = sampling_of(generator_pb2.SamplingParams(max_tokens=30), SETTINGS)
    assert fit_max_tokens(asked, 170, 200, SETTINGS) == 30
    with pytest.raises(InvalidArgument, match=r"sampling\.max_tokens is 30 but the prompt takes"):
        fit_max_tokens(asked, 171, 200, SETTINGS)
    with pytest.raises(InvalidArgument, match="prompt of 200 tokens; the context window is 200"):
        fit_max_tokens(unset, 200, 200, SETTINGS)


def test_messages_are_checked() -> None:
    ok = [common_pb2.ChatMessage(role="user", content="hi")]
    assert messages_of(ok, SETTINGS, field="messages")[0].content == "hi"
    with pytest.raises(InvalidArgument, match="messages is empty"):
        messages_of([], SETTINGS, field="messages")
    bad = [*ok, common_pb2.ChatMessage(role="robot", content="x")]
    with pytest.raises(InvalidArgument, match=r"messages\[1\]\.role is 'robot'"):
        messages_of(bad, SETTINGS, field="messages")
    small = GeneratorSettings(max_prompt_chars=3, max_messages=2)
    with pytest.raises(InvalidArgument, match="hold 4 characters; the limit is 3"):
        messages_of([common_pb2.ChatMessage(role="user", content="four")], small, field="messages")
    with pytest.raises(InvalidArgument, match="has 3 messages; the limit is 2"):
        messages_of(ok * 3, small, field="messages")


def test_settings_that_cannot_work_are_refused() -> None:
    with pytest.raises(ValueError, match="default_max_tokens"):
        GeneratorSettings(default_max_tokens=600, max_output_tokens=500)
    with pytest.raises(ValueError, match="kv_cache_tokens"):
        GeneratorSettings(context_length=4096, kv_cache_tokens=1000)
    with pytest.raises(ValueError, match="LoRA adapters load in the torch engine"):
        GeneratorSettings(adapter="/tmp/lora")


def test_engine_setting_accepts_exactly_the_registered_engines() -> None:
    """RAGRAIL_GENERATOR_ENGINE is validated by settings.EngineName and resolved through
    backends.ENGINES; an engine in one and not the other would fail only at startup."""
    assert set(get_args(EngineName)) == set(ENGINES)
    for name, target in ENGINES.items():
        module, _, cls = target.partition(":")
        assert module == f"services.generator.backends.{name}" and cls.endswith("Engine")
