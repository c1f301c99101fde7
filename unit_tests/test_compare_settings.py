"""compare-checkpoints: parsing --intervals and --crash-at, applying a setting to a config."""

import pytest

from source_framework.compare.command import parse_fraction
from source_framework.compare.settings import Setting, parse_intervals, with_concurrency, with_read_ahead


def test_intervals_keep_their_order_and_none_means_slice_checkpoints_only():
    settings = parse_intervals("none, 10000,1_000,100")
    assert [s.interval for s in settings] == [None, 10000, 1000, 100]
    assert [s.label for s in settings] == ["none", "10000", "1000", "100"]
    assert [s.slug for s in settings][:2] == ["interval-none", "interval-10000"]


@pytest.mark.parametrize("text", ["", "0", "-5", "ten", "100,100", "none,null"])
def test_bad_intervals_are_refused_with_the_option_named(text):
    with pytest.raises(ValueError, match="--intervals"):
        parse_intervals(text)


def test_a_setting_writes_the_interval_into_a_copy_of_the_config():
    config = {"api_key": "k", "state_checkpoint_interval": 7, "destination": {"type": "spark"}}
    assert Setting(None).apply(config)["state_checkpoint_interval"] is None
    updated = Setting(100).apply(config)
    updated["destination"]["type"] = "changed"
    assert updated["state_checkpoint_interval"] == 100
    assert config == {"api_key": "k", "state_checkpoint_interval": 7, "destination": {"type": "spark"}}


@pytest.mark.parametrize("text, value", [("0.5", 0.5), ("25%", 0.25), (" 0.9 ", 0.9)])
def test_crash_fraction(text, value):
    assert parse_fraction(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["0", "1", "150%", "half"])
def test_crash_fraction_must_be_strictly_inside_the_run(text):
    with pytest.raises(ValueError, match="--crash-at"):
        parse_fraction(text)


def test_concurrency_levels_multiply_the_intervals_and_reach_the_config():
    settings = with_concurrency(parse_intervals("none,1000"), "1, 4")
    assert [s.label for s in settings] == ["none c1", "none c4", "1000 c1", "1000 c4"]
    assert len({s.slug for s in settings}) == 4  # one working folder each
    config = settings[3].apply({"api_key": "k"})
    assert config["state_checkpoint_interval"] == 1000 and config["concurrency_level"] == 4
    assert "concurrency_level" not in Setting(1000).apply({"api_key": "k"})  # not given: the config's own
    assert with_concurrency(parse_intervals("none"), None) == [Setting(None)]


@pytest.mark.parametrize("text", ["0", "-1", "four", "4,4", ",", " , "])
def test_bad_concurrency_levels_are_refused_with_the_option_named(text):
    with pytest.raises(ValueError, match="--concurrency"):
        with_concurrency(parse_intervals("none"), text)


def test_read_ahead_bounds_multiply_the_settings_and_reach_the_config():
    settings = with_read_ahead(with_concurrency(parse_intervals("none,100"), "4"), "128, 1")
    assert [s.label for s in settings] == ["none c4 a128", "none c4 a1", "100 c4 a128", "100 c4 a1"]
    assert len({s.slug for s in settings}) == 4 and settings[1].slug == "interval-none-c4-a1"
    config = settings[3].apply({"api_key": "k"})
    assert config["max_checkpoints_ahead"] == 1 and config["concurrency_level"] == 4
    assert config["state_checkpoint_interval"] == 100
    assert "max_checkpoints_ahead" not in Setting(100).apply({"api_key": "k"})  # not given: the config's own
    assert [s.label for s in with_read_ahead(parse_intervals("100"), "1")] == ["100 a1"]
    assert with_read_ahead(parse_intervals("none"), None) == [Setting(None)]


@pytest.mark.parametrize("text", ["0", "-1", "x", "1,1", ","])
def test_bad_read_ahead_bounds_are_refused_with_the_option_named(text):
    with pytest.raises(ValueError, match="--max-checkpoints-ahead"):
        with_read_ahead(parse_intervals("none"), text)
