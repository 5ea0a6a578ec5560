"""The chat's slash-command parser and completion (no Textual app needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_advisor.errors import UsageError
from vllm_advisor_tui.commands import BY_NAME, COMMANDS, complete, complete_path, help_markdown, is_command, parse_command

REPO = Path(__file__).resolve().parents[1]


def test_every_command_of_the_issue_is_there():
    assert {"attach", "profile", "serve-cmd", "probe", "estimate", "whatif", "memo", "sources", "clear", "help"} <= set(BY_NAME)


def test_parse_file_argument_with_spaces_in_quotes():
    cmd = parse_command('/attach "my results/bench c40.json"')
    assert cmd.name == "attach" and cmd.args == ["my results/bench c40.json"]


def test_serve_cmd_keeps_the_whole_line_and_inner_quotes():
    cmd = parse_command("""/serve-cmd "vllm serve Qwen/Qwen2.5-32B-Instruct -tp 2 --override-generation-config '{\\"temperature\\": 0}'" """)
    assert cmd.args[0].startswith("vllm serve Qwen/Qwen2.5-32B-Instruct -tp 2 --override-generation-config '")
    unquoted = parse_command("/serve-cmd vllm serve m --max-model-len 65536")
    assert unquoted.args == ["vllm serve m --max-model-len 65536"]


def test_aliases_and_case():
    assert parse_command("/What-If kv_cache_dtype=fp8").name == "whatif"
    assert parse_command("/serve vllm serve x").name == "serve-cmd"
    assert parse_command("/source 2").args == ["2"]


@pytest.mark.parametrize(
    "line, message",
    [
        ("/atach x.json", "unknown command /atach (did you mean /attach?)"),
        ("/attach", "/attach FILE"),
        ("/sources two", "takes a source number"),
        ("/help me", "takes no arguments"),
        ('/attach "unclosed', "No closing quotation"),
        ("/memo a.md b.md", "takes one argument"),
    ],
)
def test_bad_commands_are_one_line_errors(line, message):
    with pytest.raises(UsageError) as err:
        parse_command(line)
    text = err.value.one_line()
    assert message in text and "\n" not in text


def test_is_command():
    assert is_command("  /help") and not is_command("why is TTFT 30 s?")


def test_complete_command_names():
    assert complete("/at") == "/attach "
    assert complete("/s") == "/s"  # serve-cmd, set, sources: nothing more is certain
    assert complete("/se") == "/se"  # serve-cmd and set
    assert complete("/ser") == "/serve-cmd "
    assert complete("/clear a") == "/clear all"
    assert complete("why") is None


def test_complete_paths_of_real_files(fixtures_dir):
    bench = fixtures_dir / "real-bench" / "vllm-bench"
    line = f"/attach {bench}/llm-k8s_llama33-70b_tp8_qps0"
    assert complete(line) == f"/attach {bench}/llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json"
    # two candidates share 'llm-k8s_llama33-70b_tp': completion stops where they differ
    assert complete_path(f"{bench}/llm-k8s_llama33", REPO) == f"{bench}/llm-k8s_llama33-70b_tp"
    assert complete_path("examples/seed", REPO) == "examples/seed-qwen32b-h800-long-input.yaml"
    assert complete_path("exampl", REPO) == "examples/"  # a folder gets its slash
    assert complete_path("no-such-folder/x", REPO) is None


def test_help_lists_every_command_and_the_keys():
    text = help_markdown([("ctrl+q", "Quit"), ("f1", "Help")])
    for spec in COMMANDS:
        assert spec.usage in text
    assert "| `ctrl+q` | Quit |" in text
