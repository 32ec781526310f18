from __future__ import annotations

from pathlib import Path

import pytest

from tether.config import Config, load_config, parse_config
from tether.errors import ConfigError
from tether.home import starter_text


def test_starter_config_is_the_defaults() -> None:
    assert parse_config(starter_text("tether.toml").decode()) == Config()


def test_empty_config_is_the_defaults() -> None:
    assert parse_config("") == Config()


@pytest.mark.parametrize(
    ("text", "key", "needle"),
    [
        ("[llm]\nurll = 'http://x'\n", "llm.urll", "unknown key"),
        ("[telemetry]\non = true\n", "telemetry", "unknown key"),
        ("[llm]\ntimeout_s = 'soon'\n", "llm.timeout_s", "expected `float`, got `str`"),
        ("[compact]\nthreshold = 1.5\n", "compact.threshold", "<= 1.0"),
        ("[compact]\nthreshold = 0\n", "compact.threshold", "> 0.0"),
        ("[compact]\nsummarise = ['http_fetch', 'teleport']\n", "compact.summarise", "teleport"),
        ("[expect]\nn_ctx = 10\n", "expect.n_ctx", ">= 256"),
        ("[slots]\nmain = 1\nbackground = 1\n", "slots.background", "differ"),
        ("[llm]\nbackend = 'gpt'\n", "llm.backend", "invalid enum value 'gpt'"),
        ("[llm]\nurl = 'localhost:8080'\n", "llm.url", "http://"),
        ("[heartbeat]\nprompt = '../../etc/passwd'\n", "heartbeat.prompt", "file name"),
        ("[store]\nurl = 'mysql://x'\n", "store.url", "postgresql://"),
        ("[sweep]\nenabled = 'yes'\n", "sweep.enabled", "expected `bool`"),
        ("llm = 3\n", "llm", "expected `object`"),
    ],
)
def test_bad_config_names_file_and_dotted_key(text: str, key: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "/h/tether.toml")
    err = info.value
    assert err.key == key
    assert needle in err.problem
    assert str(err).startswith(f"/h/tether.toml: {key}: ")
    assert err.exit_code == 2


def test_toml_syntax_error_names_file_and_line() -> None:
    with pytest.raises(ConfigError, match=r"x\.toml: not valid TOML: .*line 2"):
        parse_config("[llm]\nurl = \n", "x.toml")


def test_values_are_typed() -> None:
    cfg = parse_config(
        "[llm]\ntimeout_s = 5\n[compact]\nsummarise = []\n[heartbeat]\nevery_s = 60\n"
    )
    assert cfg.llm.timeout_s == 5.0
    assert cfg.compact.summarise == ()
    assert cfg.heartbeat.every_s == 60


def test_missing_file_points_to_init(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="run `tether init`"):
        load_config(tmp_path)
