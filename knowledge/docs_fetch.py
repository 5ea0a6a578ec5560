"""vLLM's documentation for the release a user runs, downloaded from GitHub on request.

The packaged cards answer without any docs; ``kb build --docs FOLDER`` ingests a checkout the user
has. ``kb build --fetch-docs --vllm-version X`` fills the gap for everyone else: it downloads the
source tarball of the tag ``vX`` (``https://github.com/vllm-project/vllm/archive/refs/tags/vX.tar.gz``),
keeps only the Markdown and mkdocs navigation files under its ``docs/`` folder, and caches them in
the index folder (``<kb_dir>/docs/vllm-X/``), so answers cite the pages of the version the user
runs, with links to that version's site (``https://docs.vllm.ai/en/vX/``).

Only on request, never in the background. Bounded: at most :data:`MAX_DOWNLOAD_BYTES` downloaded
within :data:`MAX_SECONDS`, at most :data:`MAX_FILES` files and :data:`MAX_EXTRACTED_BYTES`
extracted, and only regular files whose paths stay inside the cache folder. A second request for the
same version reads the cache and touches no network. Every failure (offline, HTTP error, a tag that
does not exist, a truncated or foreign archive) is one :class:`DocsFetchError` line naming the URL.

``VLLM_ADVISOR_DOCS_URL_BASE`` (or ``url_base``) replaces the GitHub part of the URL: a mirror
inside a company network, or the loopback server of the tests.
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Callable

from .errors import KnowledgeError

DEFAULT_URL_BASE = "https://github.com/vllm-project/vllm/archive/refs/tags"
URL_BASE_ENV = "VLLM_ADVISOR_DOCS_URL_BASE"
DOCS_SITE = "https://docs.vllm.ai/en/v{version}/"
CACHE_SUBDIR = "docs"
#: vLLM's tag tarballs are 10-40 MB (the whole repository: kernels, tests, examples); the docs
#: Markdown in them about 3 MB. These bounds leave ample room and still stop a runaway server.
MAX_DOWNLOAD_BYTES = 256 * 1024 * 1024
MAX_EXTRACTED_BYTES = 64 * 1024 * 1024
MAX_FILES = 20_000
MAX_SECONDS = 600.0
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0
#: What is kept of ``docs/``: the pages, the pages' includes, and mkdocs' navigation (small, and it
#: says how the site is organised). Images, theme assets and build scripts are left in the archive.
KEPT_SUFFIXES = (".md", ".yml", ".yaml")
SOURCE_FILE = "SOURCE.md"  # written last: its presence means the cache is complete

_VERSION = re.compile(r"^v?([0-9]+(?:\.[0-9]+){1,3}(?:[A-Za-z0-9.+-]*)?)$")

#: progress(stage, done, total): "downloading" in bytes (total 0 when the server does not say),
#: then "extracting" in archive members.
Progress = Callable[[str, int, int], None]


class DocsFetchError(KnowledgeError):
    """The docs could not be downloaded or unpacked (network, HTTP, archive); one line with the URL."""


@dataclass
class FetchedDocs:
    version: str  # "0.34.0"
    folder: Path  # the cached docs folder (its SOURCE.md names the version)
    url: str  # where the archive came from
    site_url: str  # the version's public docs site, for citations
    files: int  # files kept from docs/
    downloaded_bytes: int  # 0 when served from the cache
    cached: bool
    seconds: float


def normalize_version(version: str) -> str:
    """"v0.34.0" or "0.34.0" -> "0.34.0"; anything that is not a release number is refused."""
    match = _VERSION.match(version.strip())
    if not match:
        raise DocsFetchError(f"'{version}' is not a vLLM release number (e.g. 0.34.0)", source="--vllm-version")
    return match.group(1)


def url_base(explicit: str | None = None) -> str:
    return (explicit or os.environ.get(URL_BASE_ENV) or DEFAULT_URL_BASE).rstrip("/")


def tarball_url(version: str, base: str | None = None) -> str:
    return f"{url_base(base)}/v{normalize_version(version)}.tar.gz"


def shown_url(url: str) -> str:
    """The URL as messages and SOURCE.md show it: a mirror's ``user:password@`` is dropped."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def site_url(version: str) -> str:
    return DOCS_SITE.format(version=normalize_version(version))


def cache_folder(kb_dir: Path, version: str) -> Path:
    return Path(kb_dir) / CACHE_SUBDIR / f"vllm-{normalize_version(version)}"


def fetch_release_docs(
    version: str,
    kb_dir: Path,
    *,
    base: str | None = None,
    progress: Progress | None = None,
    max_download_bytes: int = MAX_DOWNLOAD_BYTES,
    max_extracted_bytes: int = MAX_EXTRACTED_BYTES,
    max_seconds: float = MAX_SECONDS,
    refresh: bool = False,
) -> FetchedDocs:
    """The docs of vLLM ``version`` in the cache, downloading them first when they are not there."""
    started = time.perf_counter()
    version = normalize_version(version)
    url = tarball_url(version, base)
    shown = shown_url(url)
    folder = cache_folder(kb_dir, version)
    if (folder / SOURCE_FILE).is_file() and not refresh:
        files = sum(1 for p in folder.rglob("*") if p.is_file() and p.name != SOURCE_FILE)
        return FetchedDocs(version, folder, shown, site_url(version), files, 0, True, time.perf_counter() - started)
    folder.parent.mkdir(parents=True, exist_ok=True)
    part = folder.parent / f".{folder.name}.tar.gz.part"
    staging = folder.parent / f".{folder.name}.tmp"
    try:
        size = _download(url, shown, part, progress, max_download_bytes, started + max_seconds, max_seconds)
        shutil.rmtree(staging, ignore_errors=True)
        files = _extract_docs(part, staging, shown, progress, max_extracted_bytes)
        (staging / SOURCE_FILE).write_text(_source_note(version, shown, files), encoding="utf-8")
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
    finally:
        part.unlink(missing_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
    return FetchedDocs(version, folder, shown, site_url(version), files, size, False, time.perf_counter() - started)


def _download(url: str, shown: str, target: Path, progress: Progress | None, limit: int, deadline: float, max_seconds: float) -> int:
    """Stream ``url`` to ``target``; every failure is one DocsFetchError line naming the URL (``shown``)."""
    import httpx

    timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    done = 0
    try:
        with httpx.stream("GET", url, timeout=timeout, follow_redirects=True) as response:
            if response.status_code == 404:
                raise DocsFetchError("no such release archive (HTTP 404): check the version", source=shown)
            if response.status_code >= 400:
                raise DocsFetchError(f"the server answered HTTP {response.status_code} {response.reason_phrase}".strip(), source=shown)
            declared = _int(response.headers.get("content-length"))
            if declared is not None and declared > limit:
                raise DocsFetchError(f"the archive is {declared / 2**20:.0f} MiB, over the {limit / 2**20:g} MiB limit", source=shown)
            with target.open("wb") as out:
                for chunk in response.iter_bytes(1 << 16):
                    done += len(chunk)
                    if done > limit:
                        raise DocsFetchError(f"the archive grew past the {limit / 2**20:g} MiB limit; download stopped", source=shown)
                    if time.perf_counter() > deadline:
                        raise DocsFetchError(f"the download took longer than {max_seconds:g} s; stopped", source=shown)
                    out.write(chunk)
                    if progress:
                        progress("downloading", done, declared or 0)
            if declared is not None and done < declared:
                raise DocsFetchError(f"the download ended after {done:,} of {declared:,} bytes", source=shown)
    except httpx.TimeoutException:
        raise DocsFetchError(f"no answer within {READ_TIMEOUT_S:g} s (offline?)", source=shown) from None
    except httpx.HTTPError as exc:
        raise DocsFetchError(f"cannot download ({_first_line(exc)}); offline? `kb build --docs FOLDER` ingests a local copy", source=shown) from None
    except OSError as exc:
        raise DocsFetchError(f"cannot write {target}: {exc.strerror or exc}", source=shown) from None
    return done


def _extract_docs(archive: Path, target: Path, url: str, progress: Progress | None, limit: int) -> int:
    """The ``<top>/docs/`` Markdown and navigation files of a GitHub tag tarball, into ``target``.

    Only regular files are written, each under ``target`` (no absolute paths, no ``..``, no links)."""
    kept = 0
    total = 0
    seen = 0
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                seen += 1
                if progress and seen % 200 == 0:
                    progress("extracting", seen, 0)
                if seen > MAX_FILES * 10:
                    raise DocsFetchError(f"the archive has more than {MAX_FILES * 10:,} entries; stopped", source=url)
                rel = _docs_path(member.name)
                if rel is None or not member.isfile() or not rel.name.endswith(KEPT_SUFFIXES):
                    continue
                total += member.size
                kept += 1
                if total > limit or kept > MAX_FILES:
                    raise DocsFetchError(f"docs/ holds more than {limit / 2**20:g} MiB or {MAX_FILES:,} files; stopped", source=url)
                source = tar.extractfile(member)
                if source is None:
                    continue
                dest = target.joinpath(*rel.parts)
                dest.parent.mkdir(parents=True, exist_ok=True)
                with source, dest.open("wb") as out:
                    shutil.copyfileobj(source, out)
    except (tarfile.TarError, EOFError, OSError) as exc:
        if isinstance(exc, OSError) and exc.filename and str(target) in str(exc.filename):
            raise DocsFetchError(f"cannot write the docs: {exc.strerror or exc}", source=str(target)) from None
        raise DocsFetchError(f"not a readable .tar.gz archive ({_first_line(exc)})", source=url) from None
    if progress:
        progress("extracting", seen, seen)
    if not (target.exists() and any(target.rglob("*.md"))):
        raise DocsFetchError("the archive has no docs/ folder with Markdown pages", source=url)
    return kept


def _docs_path(name: str) -> PurePosixPath | None:
    """``vllm-0.34.0/docs/a/b.md`` -> ``a/b.md``; None for anything outside ``<top>/docs/`` or unsafe."""
    parts = PurePosixPath(name).parts
    if len(parts) < 3 or parts[1] != "docs" or name.startswith("/"):
        return None
    rest = parts[2:]
    if any(p in ("", ".", "..") or "\\" in p or ":" in p for p in rest):
        return None
    return PurePosixPath(*rest)


def _source_note(version: str, url: str, files: int) -> str:
    now = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    return (
        "# Source of this folder\n\n"
        "- Repository: https://github.com/vllm-project/vllm\n"
        f"- Version: v{version}\n"
        f"- Downloaded from: {url}\n"
        f"- Date: {now}\n"
        f"- Files: {files} Markdown and navigation files of the release's docs/ folder\n"
    )


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]
