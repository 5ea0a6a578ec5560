"""`kb build --fetch-docs`: a release's docs from a GitHub-style tag tarball, against a loopback server.

The tarball is built here from real pages of ../shared/corpus/vllm-docs, laid out as GitHub lays out
``vllm-<version>/`` (docs/ beside the rest of the repository), with the things a fetch must leave
behind: files outside docs/, an image, a symlink and a path that climbs out of the folder. Nothing
here reaches the network: every URL is 127.0.0.1.
"""

from __future__ import annotations

import io
import json
import socket
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from kb_support import DOCS
from vllm_advisor.cli.main import cli
from vllm_advisor_knowledge.docs_fetch import (
    URL_BASE_ENV,
    DocsFetchError,
    cache_folder,
    fetch_release_docs,
    normalize_version,
    shown_url,
)

VERSION = "0.34.0"
PAGES = ("features/sleep_mode.md", "usage/metrics.md")
NAV = ".nav.yml"


def release_tarball(pages: tuple[str, ...] = PAGES, *, top: str = f"vllm-{VERSION}", docs: bool = True) -> bytes:
    """A tag tarball as GitHub serves it: one top folder, docs/ inside, the rest of the repo around it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:

        def add(name: str, data: bytes, kind: bytes = tarfile.REGTYPE, link: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.size, info.type, info.linkname, info.mode = (len(data) if kind == tarfile.REGTYPE else 0), kind, link, 0o644
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)

        add(f"{top}/README.md", b"# vLLM\n\nNot documentation: the repository's front page.\n")
        add(f"{top}/vllm/__init__.py", b"__version__ = '0.34.0'\n")
        if docs:
            for page in pages:
                add(f"{top}/docs/{page}", (DOCS / page).read_bytes())
            add(f"{top}/docs/{NAV}", (DOCS / NAV).read_bytes())
            add(f"{top}/docs/assets/logo.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
            add(f"{top}/docs/evil-link.md", b"", tarfile.SYMTYPE, "/etc/passwd")
            add(f"{top}/docs/../../escaped.md", b"# Escaped\n\nThis must never be written.\n")
    return buf.getvalue()


class _Releases(BaseHTTPRequestHandler):
    """Serves ``/v<version>.tar.gz`` from ``self.server.archives`` (a GitHub-like redirect first)."""

    def do_GET(self):  # noqa: N802
        archives = self.server.archives  # type: ignore[attr-defined]
        self.server.hits.append(self.path)  # type: ignore[attr-defined]
        if self.path.startswith("/archive/refs/tags/"):  # github.com answers with a redirect to codeload
            self.send_response(302)
            self.send_header("Location", "/codeload/" + self.path.rsplit("/", 1)[1])
            self.end_headers()
            return
        name = self.path.rsplit("/", 1)[-1]
        body = archives.get(name)
        if body is None:
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b"Not Found")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-gzip")
        if not self.server.chunked:  # type: ignore[attr-defined]
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture()
def releases():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Releases)
    server.archives = {f"v{VERSION}.tar.gz": release_tarball()}  # type: ignore[attr-defined]
    server.hits = []  # type: ignore[attr-defined]
    server.chunked = False  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.base = f"http://127.0.0.1:{server.server_address[1]}/archive/refs/tags"  # type: ignore[attr-defined]
    yield server
    server.shutdown()
    server.server_close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fetch_keeps_only_the_docs_and_caches_them(tmp_path: Path, releases):
    stages: list[tuple[str, int, int]] = []
    got = fetch_release_docs("v0.34.0", tmp_path / "kb", base=releases.base, progress=lambda *a: stages.append(a))
    assert (got.version, got.cached, got.files) == (VERSION, False, len(PAGES) + 1)
    assert got.folder == cache_folder(tmp_path / "kb", VERSION) and got.site_url == "https://docs.vllm.ai/en/v0.34.0/"
    kept = sorted(p.relative_to(got.folder).as_posix() for p in got.folder.rglob("*") if p.is_file())
    assert kept == sorted([*PAGES, NAV, "SOURCE.md"])  # no README, code, image, link or escaped file
    assert not (tmp_path / "escaped.md").exists() and not any((tmp_path / "kb").rglob("escaped.md"))
    for page in PAGES:
        assert (got.folder / page).read_bytes() == (DOCS / page).read_bytes()
    assert "- Version: v0.34.0" in (got.folder / "SOURCE.md").read_text(encoding="utf-8")
    downloaded = [s for s in stages if s[0] == "downloading"]
    assert downloaded[-1][1] == got.downloaded_bytes == downloaded[-1][2] > 0
    assert not list(got.folder.parent.glob(".*"))  # no partial download or staging folder left

    releases.shutdown()  # the second request must not need the server
    again = fetch_release_docs(VERSION, tmp_path / "kb", base=releases.base)
    assert (again.cached, again.files, again.downloaded_bytes) == (True, got.files, 0)


def test_one_clear_error_for_each_failure(tmp_path: Path, releases):
    with pytest.raises(DocsFetchError, match=r"no such release archive \(HTTP 404\)") as err:
        fetch_release_docs("0.0.1", tmp_path / "kb", base=releases.base)
    assert err.value.source.endswith("/v0.0.1.tar.gz")
    with pytest.raises(DocsFetchError, match="offline"):
        fetch_release_docs(VERSION, tmp_path / "kb", base=f"http://127.0.0.1:{closed_port()}")
    releases.archives["v0.1.0.tar.gz"] = release_tarball()[:2000]  # cut short: a truncated gzip stream
    releases.chunked = True
    with pytest.raises(DocsFetchError, match="not a readable .tar.gz archive"):
        fetch_release_docs("0.1.0", tmp_path / "kb", base=releases.base)
    releases.archives["v0.2.0.tar.gz"] = release_tarball(docs=False)
    with pytest.raises(DocsFetchError, match="no docs/ folder"):
        fetch_release_docs("0.2.0", tmp_path / "kb", base=releases.base)
    with pytest.raises(DocsFetchError, match="over the .* MiB limit|grew past"):
        fetch_release_docs(VERSION, tmp_path / "kb", base=releases.base, max_download_bytes=1000)
    with pytest.raises(DocsFetchError, match="not a vLLM release number"):
        normalize_version("latest; rm -rf /")
    assert not any((tmp_path / "kb" / "docs").glob("vllm-*"))  # nothing half-written was cached


def test_credentials_in_a_mirror_url_never_reach_messages():
    url = "https://builder:s3cret@mirror.example/vllm/v0.34.0.tar.gz"
    assert shown_url(url) == "https://mirror.example/vllm/v0.34.0.tar.gz"


def test_cli_errors_are_one_line_with_exit_codes(tmp_path: Path, releases, monkeypatch):
    monkeypatch.setenv(URL_BASE_ENV, releases.base)
    runner = CliRunner()
    result = runner.invoke(cli, ["kb", "build", "--fetch-docs", "--vllm-version", "0.0.1", "--kb-dir", str(tmp_path / "kb")])
    assert result.exit_code == 4 and result.output.strip().count("\n") == 0
    assert "v0.0.1.tar.gz" in result.output and "HTTP 404" in result.output
    result = runner.invoke(cli, ["kb", "build", "--fetch-docs", "--vllm-version", "banana", "--kb-dir", str(tmp_path / "kb")])
    assert result.exit_code == 2 and "not a vLLM release number" in result.output
    result = runner.invoke(cli, ["kb", "build", "--vllm-version", "0.34.0", "--kb-dir", str(tmp_path / "kb")])
    assert result.exit_code == 2 and "--fetch-docs" in result.output
    offline = f"http://127.0.0.1:{closed_port()}"
    result = runner.invoke(cli, ["kb", "build", "--fetch-docs", "--vllm-version", VERSION, "--docs-url-base", offline,
                                 "--kb-dir", str(tmp_path / "kb")])
    assert result.exit_code == 4 and result.output.strip().count("\n") == 0 and "offline" in result.output


def test_build_fetches_indexes_and_cites_that_version(tmp_path: Path, releases, monkeypatch):
    """The whole command: download, ingest in place of other vLLM docs, search cites the release's site."""
    monkeypatch.setenv(URL_BASE_ENV, releases.base)
    kb_dir = tmp_path / "kb"
    runner = CliRunner()
    result = runner.invoke(cli, ["kb", "build", "--fetch-docs", "--vllm-version", VERSION, "--kb-dir", str(kb_dir), "--json"])
    assert result.exit_code == 0, result.output
    reports = {r["source"]: r for r in json.loads(result.stdout)}
    assert set(reports) == {"cards", "vllm-docs"} and reports["vllm-docs"]["documents"] == len(PAGES)
    result = runner.invoke(cli, ["kb", "search", "put the engine to sleep and wake it up", "--kind", "doc", "-k", "1",
                                 "--kb-dir", str(kb_dir), "--json"])
    top = json.loads(result.stdout)["results"][0]
    assert top["doc_id"] == "doc:features/sleep_mode.md" and top["version"] == VERSION
    assert top["url"] == "https://docs.vllm.ai/en/v0.34.0/features/sleep_mode/"
    hits_before = len(releases.hits)
    result = runner.invoke(cli, ["kb", "build", "--fetch-docs", "--vllm-version", VERSION, "--kb-dir", str(kb_dir)])
    assert result.exit_code == 0, result.output
    assert "from the cache" in result.output and len(releases.hits) == hits_before  # cached: no request
