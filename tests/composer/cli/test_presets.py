from __future__ import annotations

import json

from composer.cli import main
from composer.presets import PRESETS


def test_json_lists_every_preset_with_params(capsys):
    assert main(["presets", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in rows] == list(PRESETS)
    by_name = {row["name"]: row for row in rows}
    assert by_name["llama-3.2-3b"]["params"] == 3_212_749_824
    assert by_name["llama-3.1-8b"]["tie_embeddings"] is False
    assert by_name["llama-3.2-1b"]["d_model"] == 2048


def test_table(capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:2] == ["name", "pattern"]
    assert "llama-350m" in out and "1.24B" in out
