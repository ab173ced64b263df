"""Stop strings cut from a stream however the engine splits the text."""

from __future__ import annotations

import pytest

from services.generator.stops import StopMatcher


def run(stops: tuple[str, ...], deltas: list[str]) -> tuple[str, bool]:
    matcher = StopMatcher(stops)
    sent = []
    for delta in deltas:
        text, stopped = matcher.feed(delta)
        sent.append(text)
        if stopped:
            return "".join(sent), True
    return "".join(sent) + matcher.flush(), False


@pytest.mark.parametrize(
    ("deltas", "expected"),
    [
        (["Hello, wor", "ld. END here"], ("Hello, world. ", True)),
        (["Hello E", "N", "D"], ("Hello ", True)),  # split over three deltas
        (["E", "NDING"], ("", True)),
        (["no stop ", "at all E"], ("no stop at all E", False)),  # held tail comes back at the end
        (["an ENd", " and END"], ("an ENd and ", True)),  # case-sensitive
    ],
)
def test_stop_strings_are_cut_across_deltas(deltas: list[str], expected: tuple[str, bool]) -> None:
    assert run(("END",), deltas) == expected


def test_earliest_of_several_stop_strings_wins() -> None:
    assert run(("\n\n", "Question:"), ["A: yes. Question: no\n\n"]) == ("A: yes. ", True)
    assert run(("###", "##"), ["a#", "#b"]) == ("a", True)


def test_nothing_is_held_without_stop_strings() -> None:
    matcher = StopMatcher(())
    assert matcher.feed("E") == ("E", False)
    assert matcher.flush() == ""


def test_only_a_possible_stop_prefix_is_held() -> None:
    matcher = StopMatcher(("</answer>",))
    assert matcher.feed("x < y </ans") == ("x < y ", False)
    assert matcher.feed("wer>") == ("", True)
