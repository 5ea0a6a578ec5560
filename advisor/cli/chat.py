"""``vllm-advisor chat``: talk to the advisor about a deployment in a terminal UI.

The UI lives in the separate ``vllm_advisor_tui`` package (Textual). Dependencies point from the
UI to the core, never back: this command finds the UI by name when it is run, so importing the
CLI never imports Textual, and a missing UI is one clear line instead of an import error.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from ..errors import AdvisorError, UsageError
from .ask import chroma_url_option, common_inputs, no_log_option

UI_MODULE = "vllm_advisor_tui.app"


@click.command()
@common_inputs
@click.option("--metrics", "metrics", multiple=True, metavar="URL|FILE", help="A /metrics URL to scrape once or a saved dump / watch file (repeatable); /probe URL watches live.")
@click.option("--serve-cmd", help="The `vllm serve ...` command line.")
@click.option("--model", help="Model: catalog name, Hugging Face id, or path to a config.json.")
@click.option("--gpu", help="GPU: catalog name (H100, H800, H200, A100-80G, L40S, RTX4090, ...).")
@click.option("--num-gpus", type=click.IntRange(min=1), help="GPUs serving the model.")
@click.option("--vllm-version", help="vLLM version (decides the defaults of unset flags).")
@click.option("--llm-base-url", metavar="URL", help="An OpenAI-compatible endpoint that writes the prose, streamed; the findings stay the advisor's.")
@click.option("--llm-model", metavar="NAME", help="Model name at --llm-base-url (default: the one the endpoint serves).")
@click.option("--llm-key-env", metavar="NAME", default="OPENAI_API_KEY", show_default=True, help="Environment variable holding the endpoint's API key (its value is never logged).")
@click.option("--resume", is_flag=True, help="Continue the last conversation: its messages and its evidence.")
@click.option("--theme", metavar="NAME", help="A Textual theme, e.g. textual-dark, textual-light, nord, gruvbox (Ctrl+P > Change theme lists them).")
@chroma_url_option
@no_log_option
def chat(profile, attachments, metrics, serve_cmd, model, gpu, num_gpus, vllm_version, llm_base_url, llm_model, llm_key_env, resume, theme, chroma_url, no_log) -> None:
    """Talk to the advisor about your deployment: questions and answers with sources, evidence
    attached as you go (/attach, /profile, /serve-cmd, /probe), the model's tables (/estimate,
    /whatif) and the memo (/memo). F1 lists every command and key.

    \b
    vllm-advisor chat
    vllm-advisor chat --profile case.yaml --attach bench.json
    vllm-advisor chat --resume
    """
    if llm_model and not llm_base_url:
        raise UsageError("--llm-model needs --llm-base-url")
    try:
        ui = importlib.import_module(UI_MODULE)
    except ImportError as exc:
        raise AdvisorError(f"the chat needs its terminal UI ({exc.name} is missing): pip install 'textual>=1.0' and reinstall vllm-advisor") from None
    llm = ui.LLMSettings(base_url=llm_base_url, model=llm_model, key_env=llm_key_env) if llm_base_url else None
    app = ui.ChatApp(
        profile=Path(profile) if profile else None,
        attachments=list(attachments),
        metrics=list(metrics),
        serve_cmd=serve_cmd,
        facts={"model": model, "gpu": gpu, "num_gpus": num_gpus, "vllm_version": vllm_version},
        llm=llm,
        resume=resume,
        theme=theme,
        log=not no_log,
        chroma_url=chroma_url,
    )
    app.run()
