"""``vllm-advisor kb ...``: build, fill, inspect and search the knowledge base.

The knowledge package (chromadb, sentence-transformers, torch) takes seconds to import, so it is
imported inside each command, never when the CLI starts. Its errors are translated here into
one-line advisor errors: a bad source file exits 3, an unreachable Chroma server 4, anything else 1.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import click

from ..errors import AdvisorError, EndpointError, InputFileError, UsageError
from .output import console, emit_json, json_option


def _kb_options(f: Callable) -> Callable:
    f = click.option(
        "--chroma-url",
        envvar="VLLM_ADVISOR_CHROMA_URL",
        help="A Chroma server shared by a team (http://HOST:PORT) instead of the local index. [env: VLLM_ADVISOR_CHROMA_URL]",
    )(f)
    f = click.option(
        "--kb-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Index folder. Default: $VLLM_ADVISOR_HOME/kb, else $XDG_DATA_HOME/vllm-advisor/kb (~/.local/share/vllm-advisor/kb).",
    )(f)
    return f


def _model_option(f: Callable) -> Callable:
    return click.option(
        "--embedding-model",
        help="sentence-transformers model (folder or cached Hugging Face name). Default: the index's own; "
        "all-MiniLM-L6-v2 (bundled, offline) for a new index.",
    )(f)


@contextmanager
def _knowledge_errors(chroma_url: str | None) -> Iterator[None]:
    """Knowledge-base errors as one-line advisor errors with the right exit code."""
    from vllm_advisor_knowledge.docs_fetch import DocsFetchError
    from vllm_advisor_knowledge.errors import IndexUnavailableError, KnowledgeError, SourceFileError

    try:
        yield
    except SourceFileError as exc:
        raise InputFileError(exc.message, source=exc.source) from None
    except DocsFetchError as exc:
        raise EndpointError(exc.message, source=exc.source) from None
    except IndexUnavailableError as exc:
        cls = EndpointError if chroma_url else AdvisorError
        raise cls(exc.message, source=exc.source) from None
    except KnowledgeError as exc:
        raise AdvisorError(exc.message, source=exc.source) from None


@contextmanager
def _issue_errors() -> Iterator[None]:
    """The issue fetcher's errors carry the advisor's exit code (3 bad file, 4 GitHub, 130 Ctrl-C)."""
    from vllm_advisor_knowledge.github_issues import GitHubIssuesError

    try:
        yield
    except GitHubIssuesError as exc:
        cls = {3: InputFileError, 4: EndpointError}.get(getattr(exc, "exit_code", 1), AdvisorError)
        err = cls(str(exc))
        err.exit_code = getattr(exc, "exit_code", err.exit_code)
        raise err from None


def _note(message: str) -> None:
    click.echo(click.style("note: ", fg="yellow", bold=True) + message, err=True)


def _open(kb_dir: Path | None, chroma_url: str | None, embedding_model: str | None = None):
    from vllm_advisor_knowledge.knowledge_base import KnowledgeBase

    return KnowledgeBase(kb_dir, chroma_url=chroma_url, embedding_model=embedding_model, notify=_note)


@contextmanager
def _progress(as_json: bool) -> Iterator[Callable[[str, int, int], None]]:
    """A rich progress bar fed by the knowledge base's progress(stage, done, total) calls."""
    if as_json:
        yield lambda stage, done, total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("[bold]{task.description:<14}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console(),
        transient=True,
    )
    tasks: dict[str, Any] = {}

    def update(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = bar.add_task(stage, total=max(total, 1))
        bar.update(tasks[stage], completed=done if total else 1, total=max(total, 1))
        if done >= total:  # the next source starts its stages afresh
            bar.remove_task(tasks.pop(stage))

    with bar:
        yield update


def _reports_table(reports: list[Any], title: str):
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col in ("source", "documents", "chunks", "embedded", "unchanged", "reused", "deleted", "time", "chunks/s"):
        table.add_column(col, justify="left" if col == "source" else "right")
    for r in reports:
        table.add_row(
            r.source, str(r.documents), str(r.chunks), str(r.embedded), str(r.unchanged), str(r.reused), str(r.deleted),
            f"{r.seconds:.1f} s", f"{r.chunks_per_second:,.0f}",
        )
    return table


def _emit_reports(reports: list[Any], as_json: bool, title: str) -> None:
    if as_json:
        emit_json([r.to_dict() for r in reports])
    else:
        console().print(_reports_table(reports, title))


def _handled(f: Callable) -> Callable:
    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _knowledge_errors(kwargs.get("chroma_url")):
            return f(*args, **kwargs)

    return wrapper


@click.group()
def kb() -> None:
    """The knowledge base: our tuning cards, vLLM's docs and GitHub issue threads, searchable
    in English and Chinese."""


@kb.command("build")
@click.option("--docs", "docs_dirs", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="Also ingest this Markdown folder (repeatable); remembered for later builds.")
@click.option("--docs-version", help="vLLM version of the --docs folders when they have no SOURCE.md.")
@click.option("--fetch-docs", is_flag=True,
              help="Download the docs of vLLM --vllm-version from GitHub (the release's source tarball, docs/ only; "
              "cached in the index folder) and index them in place of any earlier vLLM docs.")
@click.option("--vllm-version", metavar="X.Y.Z", help="The vLLM release whose docs --fetch-docs downloads (default: the vllm installed here).")
@click.option("--docs-url-base", envvar="VLLM_ADVISOR_DOCS_URL_BASE", metavar="URL",
              help="Where --fetch-docs finds v<X>.tar.gz (a mirror). Default: "
              "https://github.com/vllm-project/vllm/archive/refs/tags [env: VLLM_ADVISOR_DOCS_URL_BASE]")
@_model_option
@_kb_options
@json_option
@_handled
def build_cmd(docs_dirs: tuple[Path, ...], docs_version: str | None, fetch_docs: bool, vllm_version: str | None,
              docs_url_base: str | None, embedding_model: str | None, kb_dir: Path | None, chroma_url: str | None,
              as_json: bool) -> None:
    """Index the cards and every configured source; only new or changed chunks are embedded."""
    if vllm_version and not fetch_docs:
        raise UsageError("--vllm-version goes with --fetch-docs (for a local folder: --docs FOLDER --docs-version X)")
    fetched = _fetch_docs(vllm_version, docs_url_base, kb_dir, as_json) if fetch_docs else None
    base = _open(kb_dir, chroma_url, embedding_model)
    if fetched is not None:
        from vllm_advisor_knowledge.markdown_docs import VLLM_DOCS_SOURCE

        # The release's pages take the place of the vLLM docs indexed before (another version, or a
        # checkout): build then ingests them once, instead of refreshing the old ones first.
        base.set_docs_folder(VLLM_DOCS_SOURCE, fetched.folder, version=fetched.version, base_url=fetched.site_url)
    with _progress(as_json) as progress:
        reports = base.build(progress=progress)
        for folder in docs_dirs:
            reports.append(base.ingest_markdown_folder(folder, version=docs_version, progress=progress))
    _emit_reports(reports, as_json, f"Knowledge base built at {base.location}")


def _installed_vllm_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vllm")
    except PackageNotFoundError:
        return None


def _fetch_docs(vllm_version: str | None, url_base: str | None, kb_dir: Path | None, as_json: bool) -> Any:
    """Download (or find in the cache) the docs of the release; a byte progress bar while downloading."""
    from vllm_advisor_knowledge.docs_fetch import DocsFetchError, fetch_release_docs, normalize_version
    from vllm_advisor_knowledge.paths import resolve_kb_dir

    version = vllm_version or _installed_vllm_version()
    if not version:
        raise UsageError("--fetch-docs needs --vllm-version X.Y.Z (no vllm package is installed here to read it from)")
    try:
        version = normalize_version(version)
    except DocsFetchError as exc:
        raise UsageError(f"--vllm-version: {exc.message}") from None
    with _download_progress(as_json) as progress:
        fetched = fetch_release_docs(version, resolve_kb_dir(kb_dir), base=url_base, progress=progress)
    if not as_json:
        where = "from the cache" if fetched.cached else f"{fetched.downloaded_bytes / 2**20:.1f} MiB from {fetched.url}"
        _note(f"vLLM {fetched.version} docs: {fetched.files} files {where} in {fetched.seconds:.1f} s ({fetched.folder})")
    return fetched


@contextmanager
def _download_progress(as_json: bool) -> Iterator[Callable[[str, int, int], None]]:
    """Bytes downloaded (and the total, when the server says it), then archive entries read."""
    if as_json:
        yield lambda stage, done, total: None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn, TransferSpeedColumn

    bar = Progress(
        TextColumn("[bold]{task.description:<14}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeElapsedColumn(),
        console=console(), transient=True,
    )
    tasks: dict[str, Any] = {}

    def update(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = bar.add_task(stage, total=total or None)
        bar.update(tasks[stage], completed=done, total=total or None)

    with bar:
        yield update


@kb.command("ingest-docs")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--version", "version", help="vLLM version the pages describe (default: read from the folder's SOURCE.md).")
@click.option("--base-url", help="Public URL of the folder's root (default: https://docs.vllm.ai/en/latest/).")
@click.option("--source", "source", help="Name of this source (default: vllm-docs); another name keeps both.")
@_kb_options
@json_option
@_handled
def ingest_docs_cmd(path: Path, version: str | None, base_url: str | None, source: str | None,
                    kb_dir: Path | None, chroma_url: str | None, as_json: bool) -> None:
    """Ingest a folder of Markdown (e.g. the docs/ of a vLLM checkout), heading by heading."""
    base = _open(kb_dir, chroma_url)
    with _progress(as_json) as progress:
        report = base.ingest_markdown_folder(path, source=source, version=version, base_url=base_url, progress=progress)
    _emit_reports([report], as_json, f"Ingested {path}")


@kb.command("ingest-issues")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--source", "source", default="issues", show_default=True, help="Name of this source.")
@_kb_options
@json_option
@_handled
def ingest_issues_cmd(file: Path, source: str, kb_dir: Path | None, chroma_url: str | None, as_json: bool) -> None:
    """Ingest GitHub issue threads from a JSONL file (as written by `kb fetch-issues`)."""
    base = _open(kb_dir, chroma_url)
    with _issue_errors(), _progress(as_json) as progress:
        report = base.ingest_issue_file(file, source=source, progress=progress)
    _emit_reports([report], as_json, f"Ingested {file}")


@kb.command("fetch-issues")
@click.argument("repo", default="vllm-project/vllm")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="JSONL file to write or update (default: issues/OWNER__NAME.jsonl in the index folder).")
@click.option("--label", "labels", multiple=True, help="Only threads carrying this label (repeatable: all of them).")
@click.option("--since", help="Only threads updated at or after this ISO 8601 date or time.")
@click.option("--state", type=click.Choice(["open", "closed", "all"]), default="all", show_default=True)
@click.option("--max-issues", type=click.IntRange(1), help="Stop after this many threads (the next run resumes).")
@click.option("--include-prs", is_flag=True, help="Keep pull requests too.")
@click.option("--api-url", default="https://api.github.com", show_default=True,
              help="GitHub API base URL (GitHub Enterprise: https://HOST/api/v3).")
@click.option("--ingest/--no-ingest", default=True, show_default=True, help="Ingest the file into the index afterwards.")
@click.option("--source", "source", default="issues", show_default=True, help="Source name for the ingest.")
@_kb_options
@json_option
@_handled
def fetch_issues_cmd(repo: str, output: Path | None, labels: tuple[str, ...], since: str | None, state: str,
                     max_issues: int | None, include_prs: bool, api_url: str, ingest: bool, source: str,
                     kb_dir: Path | None, chroma_url: str | None, as_json: bool) -> None:
    """Fetch GitHub issue threads (GITHUB_TOKEN or GH_TOKEN raises the rate limit) into JSONL, then ingest them.

    Re-running resumes from the newest thread in the file and asks GitHub with ETags, so it is cheap.
    """
    from vllm_advisor_knowledge.github_issues import fetch_issues, normalize_repo
    from vllm_advisor_knowledge.paths import resolve_kb_dir

    with _issue_errors():
        owner_repo = normalize_repo(repo)
        out = output or resolve_kb_dir(kb_dir) / "issues" / (owner_repo.replace("/", "__") + ".jsonl")
        out.parent.mkdir(parents=True, exist_ok=True)
        with _progress(as_json) as progress:
            result = fetch_issues(
                owner_repo, out, labels=list(labels), since=since, state=state, max_issues=max_issues,
                include_prs=include_prs, api_url=api_url, on_progress=lambda done, total: progress("fetching", done, total or done + 1),
            )
        report = None
        if ingest:
            base = _open(kb_dir, chroma_url)
            with _progress(as_json) as progress:
                report = base.ingest_issue_file(out, source=source, progress=progress)
    if as_json:
        emit_json({
            "fetch": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(result).items()},
            "ingest": report.to_dict() if report else None,
        })
        return
    console().print(
        f"{result.issues_fetched} new or updated threads, {result.issues_written} in {result.out_path} "
        f"({result.pages_fetched} pages, {result.not_modified} unchanged by ETag)", highlight=False
    )
    if report:
        console().print(_reports_table([report], f"Ingested {out}"))


@kb.command("search")
@click.argument("query")
@click.option("-k", "k", default=5, show_default=True, type=click.IntRange(1, 100), help="How many passages.")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(["card", "doc", "issue"]), help="Only these kinds (repeatable).")
@_model_option
@_kb_options
@json_option
@_handled
def search_cmd(query: str, k: int, kinds: tuple[str, ...], embedding_model: str | None,
               kb_dir: Path | None, chroma_url: str | None, as_json: bool) -> None:
    """Search the knowledge base (English or Chinese) by meaning and keywords at once."""
    if not query.strip():
        raise UsageError("the query is empty")
    base = _open(kb_dir, chroma_url, embedding_model)
    results = base.search(query, k, kinds=kinds or None)
    expanded = base.expand(query)
    if as_json:
        emit_json({
            "query": query,
            "query_used": {"dense": expanded.dense_text, "bm25": expanded.bm25_text, "glossary": expanded.matched_terms},
            "results": [r.to_dict() for r in results],
        })
        return
    out = console()
    if expanded.translated:
        out.print(f"[dim]glossary: {', '.join(f'{zh}={en}' for zh, en in expanded.matched_terms.items())}[/]")
    if not results:
        out.print("no passages found")
    from rich.markup import escape

    for i, r in enumerate(results, start=1):
        heading = r.heading.removeprefix(r.title).removeprefix(" > ")
        where = f"{r.title} > {heading}" if heading else r.title
        version = f" (vLLM {r.version})" if r.version else ""
        out.print(f"[bold]{i}. \\[{r.kind}] {escape(where)}[/]{escape(version)}", highlight=False)
        out.print(f"   [cyan]{r.url}[/]", highlight=False)
        out.print(f"   {r.snippet}", highlight=False, markup=False)


@kb.command("status")
@_kb_options
@json_option
@_handled
def status_cmd(kb_dir: Path | None, chroma_url: str | None, as_json: bool) -> None:
    """What is indexed, per source and version."""
    status = _open(kb_dir, chroma_url).status()
    if as_json:
        emit_json(status.to_dict())
        return
    from rich.table import Table

    out = console()
    out.print(f"index: {status.location}  health: {status.health}  model: {status.embedding_model or '-'}  chunks: {status.chunks:,}",
              highlight=False)
    table = Table(title_justify="left")
    for col in ("source", "kind", "version", "documents", "chunks", "from", "ingested (UTC)"):
        table.add_column(col, justify="right" if col in ("documents", "chunks") else "left")
    for s in status.sources:
        table.add_row(s.source, s.kind, ", ".join(s.versions) or "-", f"{s.documents:,}", f"{s.chunks:,}",
                      s.path or "(packaged)", (s.ingested_at or "-").replace("T", " ").removesuffix("+00:00"))
    if status.sources:
        out.print(table)
