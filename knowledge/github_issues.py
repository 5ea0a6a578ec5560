"""GitHub issue threads for the knowledge base: fetch them over the REST API into a JSONL file, and read
such a file back as one :class:`SourceDocument` per thread.

WHY issue threads: most of what is known about a slow vLLM deployment was first worked out in an issue
("long prompts block decodes", "TTFT grows with the request rate"); the maintainers' replies are the
citations an answer needs.

Fetching (:func:`fetch_issues`)
    ``GET /repos/{owner}/{repo}/issues?state=..&sort=updated&direction=asc&per_page=100`` following the
    ``Link: <..>; rel="next"`` header, then each thread's comments (paginated too). Pull requests come
    back from that endpoint as well (items with a ``pull_request`` key) and are skipped unless asked for.
    Oldest update first, so every prefix of a run is "all threads updated up to time T": an interrupted
    or rate-limited run keeps what it has and the next run resumes from there.

    * Output: one JSON object per line, sorted by issue number, written to a temp file and moved into
      place with ``os.replace`` (a reader never sees half a file). On Ctrl-C or a fatal error mid-run the
      threads already complete are saved the same way, and the error says so (:class:`FetchInterrupted`).
    * Incremental: when the output file exists and no ``since`` is given, the fetch asks only for threads
      updated at or after the newest ``updated_at`` in the file and merges by issue number (updated
      threads replaced, the others kept). It does so only when the sidecar records the same query
      (state, labels, pull requests), so switching ``--label`` never leaves holes; ``resume=False``
      refetches everything (still merged).
    * Conditional requests: the sidecar ``<out>.etags.json`` maps each request URL to its ``ETag`` and the
      slimmed page it answered (the fields we keep, not GitHub's full objects). The next identical request
      sends ``If-None-Match``; a ``304 Not Modified`` reuses the stored page and, when authenticated, does
      not count against the primary rate limit. Comment pages have stable URLs, so a re-run mostly costs
      304s. The sidecar is only a cache: unreadable means empty, and it keeps the entries a run used.
    * Rate limits: a 403/429 with ``Retry-After`` waits that long (secondary limit); with
      ``X-RateLimit-Remaining: 0`` it waits until ``X-RateLimit-Reset`` (measured against the answer's
      ``Date``, so a skewed local clock does not matter) plus 1 s; a 403/429 naming a secondary rate limit
      without either header waits 60 s, then longer. A wait longer than ``max_wait`` becomes a
      :class:`GitHubFetchError` saying when the limit resets. 5xx answers and connection errors are
      retried with exponential backoff. All waits go through the injected ``sleep``.
    * Secrets: the token (argument, else ``GITHUB_TOKEN`` or ``GH_TOKEN``) travels only in the
      ``Authorization`` header and only to ``api_url``'s host: comment URLs are built from ``api_url``
      rather than taken from answers, and a pagination link to another host is refused. Messages never
      contain it.

Known limit: GitHub paginates by offset. A thread updated while a long run is between pages moves to the
end of the ordering and can shift one unseen thread onto a page already read; a later run with an
earlier ``since`` (or ``resume=False``) picks such threads up.

Reading (:func:`load_issue_threads`)
    Each line becomes one document: title, a header line (state, labels, dates), the body, then
    ``## Comments`` with each comment as ``**user** (date): body``. Pasted logs swamp retrieval (one
    300-line server log outweighs the sentence that explains it), so fenced blocks longer than
    ``max_block_lines`` keep their first 10 and last 20 lines around a ``[... N lines cut ...]`` marker
    (the end of a traceback is where the error is), lines inside blocks are capped at 500 characters,
    terminal colour codes, HTML comments (issue-template instructions) and vLLM's "Before submitting a new issue" checklist are
    dropped, and a post still longer than ``max_post_chars`` keeps its head and tail.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from .documents import SourceDocument

#: environment variables holding a GitHub token, first found wins
TOKEN_ENVS = ("GITHUB_TOKEN", "GH_TOKEN")
DEFAULT_API_URL = "https://api.github.com"
#: GitHub's largest page
PER_PAGE = 100
#: suffix of the conditional-request cache next to the output file
SIDECAR_SUFFIX = ".etags.json"
_SIDECAR_VERSION = 1
#: an answer larger than this is not an API page
_MAX_ANSWER_BYTES = 64 * 1024 * 1024
_REPO_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
_ISSUE_URL_RE = re.compile(r"^https?://[^/]+/([^/]+/[^/]+)/(?:issues|pull)/(\d+)(?:[/?#].*)?$")


class GitHubIssuesError(Exception):
    """Base of this module's errors; the message is one line and never holds the token."""

    exit_code = 1


class GitHubFetchError(GitHubIssuesError):
    """The fetch failed (HTTP, rate limit, bad answer). ``result`` tells what was saved before it, if anything."""

    exit_code = 4  # the advisor's code for an endpoint failure

    def __init__(self, message: str, *, result: FetchResult | None = None) -> None:
        super().__init__(" ".join(message.split()))
        self.result = result


class FetchInterrupted(GitHubFetchError):
    """Ctrl-C during a fetch: the threads already complete were saved (``result``); run again to resume."""

    exit_code = 130


class IssueFileError(GitHubIssuesError):
    """An issues JSONL file is missing, empty, binary or has a bad line (the message names the line)."""

    exit_code = 3  # the advisor's code for a bad input file

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


@dataclass
class FetchResult:
    """What a fetch did: counts are for this run except ``issues_written`` (lines in the file now)."""

    out_path: Path
    issues_written: int  # threads in the output file after the merge
    issues_fetched: int  # threads fetched (new or updated) in this run
    pages_fetched: int  # pages of issues and comments answered, 304s included
    not_modified: int  # pages answered 304 from the ETag cache (free against the primary rate limit)
    rate_limit_waits: int
    rate_limit_wait_s: float  # seconds handed to ``sleep`` for rate limits
    retries: int  # 5xx answers and connection errors retried
    prs_skipped: int
    resumed_since: str | None  # the ``since`` taken from the existing file, when the run resumed
    interrupted: bool = False
    note: str = ""


# ---------------------------------------------------------------------------------------------
# fetch


def fetch_issues(
    repo: str,
    out_path: Path,
    *,
    labels: list[str] | None = None,
    since: str | None = None,
    state: str = "all",
    max_issues: int | None = None,
    include_prs: bool = False,
    token: str | None = None,
    api_url: str = DEFAULT_API_URL,
    client: httpx.Client | None = None,
    on_progress: Callable[[int, int | None], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    max_wait: float = 15 * 60,
    resume: bool = True,
    retries: int = 3,
    backoff: float = 1.0,
    timeout: float = 30.0,
) -> FetchResult:
    """Fetch the issue threads of ``repo`` ("owner/name") into the JSONL file ``out_path``.

    ``labels``: threads carrying all of them; ``since``: ISO 8601 date or time, threads updated at or
    after it; ``max_issues``: stop after that many threads this run (the next run resumes);
    ``on_progress(done, total)``: after each thread, ``total`` is ``max_issues`` or None (GitHub does not
    say how many match). See the module docstring for resume, ETags and rate limits.
    """
    owner_repo = normalize_repo(repo)
    if state not in ("open", "closed", "all"):
        raise GitHubFetchError(f"state must be open, closed or all, not {state!r}")
    if max_issues is not None and max_issues < 1:
        raise GitHubFetchError(f"max_issues must be at least 1, not {max_issues}")
    label_list = sorted({name.strip() for name in labels or [] if name.strip()})
    since_param = normalize_since(since) if since else None
    out = Path(out_path)
    api = api_url.rstrip("/")
    token = token if token is not None else _token_from_env()

    existing = _existing_threads(out, owner_repo)
    query = {"state": state, "labels": label_list, "include_prs": include_prs}
    cache = _EtagCache.load(sidecar_path(out))
    resumed_since = None
    if since_param is None and resume and existing and cache.same_query(owner_repo, query):
        resumed_since = max(record["updated_at"] for record in existing.values())
        since_param = resumed_since

    params: dict[str, str] = {"state": state, "sort": "updated", "direction": "asc", "per_page": str(PER_PAGE)}
    if label_list:
        params["labels"] = ",".join(label_list)
    if since_param:
        params["since"] = since_param

    stats = _Stats()
    own_client = client is None
    http = httpx.Client(timeout=timeout, follow_redirects=True) if own_client else client
    session = _Session(http, api, token, sleep, max_wait, retries, backoff, cache, stats)
    fetched: dict[int, dict[str, Any]] = {}

    def save(*, complete: bool, note: str = "") -> FetchResult:
        merged = {**existing, **fetched}
        if fetched or (complete and not out.exists()):  # an empty run still leaves a (valid, empty) file
            _write_jsonl(out, merged)
        cache.save(sidecar_path(out), owner_repo, query, prune=complete)
        return FetchResult(
            out_path=out,
            issues_written=len(merged),
            issues_fetched=len(fetched),
            pages_fetched=stats.pages,
            not_modified=stats.not_modified,
            rate_limit_waits=stats.rate_limit_waits,
            rate_limit_wait_s=stats.rate_limit_wait_s,
            retries=stats.retries,
            prs_skipped=stats.prs_skipped,
            resumed_since=resumed_since,
            interrupted=not complete,
            note=note,
        )

    def kept(result: FetchResult) -> str:
        counts = f"{result.issues_fetched} new or updated threads, {result.issues_written} in all"
        return f"kept {counts}, in {out}; run again to resume"

    try:
        listing = f"{api}/repos/{owner_repo}/issues"
        try:
            for item in session.pages(listing, params, kind="issue", what=f"the issues of {owner_repo}"):
                if item["pull_request"] and not include_prs:
                    stats.prs_skipped += 1
                    continue
                record = _issue_record(item)
                if item["comments"] > 0:
                    comments_url = f"{api}/repos/{owner_repo}/issues/{item['number']}/comments"
                    what = f"the comments of {owner_repo}#{item['number']}"
                    try:
                        pages = session.pages(comments_url, {"per_page": str(PER_PAGE)}, kind="comment", what=what)
                        record["comments"] = list(pages)
                    except _NotFound:
                        continue  # deleted or transferred since it was listed: nothing to keep
                fetched[record["number"]] = record
                if on_progress is not None:
                    on_progress(len(fetched), max_issues)
                if max_issues is not None and len(fetched) >= max_issues:
                    break
        except _NotFound:
            hint = "the token cannot read it" if token else "private: set GITHUB_TOKEN"
            raise GitHubFetchError(f"repository {owner_repo} not found (or {hint})") from None
    except KeyboardInterrupt:
        result = save(complete=False, note="interrupted")
        raise FetchInterrupted(f"interrupted: {kept(result)}", result=result) from None
    except GitHubFetchError as exc:
        if not fetched:
            raise
        result = save(complete=False, note=str(exc))
        raise GitHubFetchError(f"{exc} ({kept(result)})", result=result) from None
    finally:
        if own_client:
            http.close()
    return save(complete=True)


def normalize_repo(repo: str) -> str:
    """ "owner/name" from what the user typed (also a github.com URL), or :class:`GitHubFetchError`."""
    text = repo.strip().removesuffix("/").removesuffix(".git")
    match = re.match(r"^(?:https?://)?(?:www\.)?github\.com/([^/]+/[^/]+)$", text)
    if match:
        text = match.group(1)
    if not _REPO_RE.match(text):
        raise GitHubFetchError(f"not a GitHub repository {repo!r} (expected owner/name, e.g. vllm-project/vllm)")
    return text


def normalize_since(since: str) -> str:
    """ISO 8601 date or time -> ``YYYY-MM-DDTHH:MM:SSZ`` (UTC; a time without zone is taken as UTC)."""
    text = since.strip()
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        example = "e.g. 2025-01-31 or 2025-01-31T12:00:00Z"
        raise GitHubFetchError(f"since {since!r} is not an ISO 8601 date or time ({example})") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def sidecar_path(out_path: Path) -> Path:
    """Where the ETag cache of ``out_path`` lives."""
    out = Path(out_path)
    return out.with_name(out.name + SIDECAR_SUFFIX)


def _token_from_env() -> str | None:
    for name in TOKEN_ENVS:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


@dataclass
class _Stats:
    pages: int = 0
    not_modified: int = 0
    rate_limit_waits: int = 0
    rate_limit_wait_s: float = 0.0
    retries: int = 0
    prs_skipped: int = 0


class _NotFound(Exception):
    """HTTP 404: the caller knows whether that means a missing repository or a vanished thread."""


class _EtagCache:
    """Request URL -> {etag, next, items}: the sidecar that makes repeated requests conditional."""

    def __init__(self, entries: dict[str, dict[str, Any]], repo: str | None, query: dict[str, Any] | None) -> None:
        self.entries = entries
        self.repo = repo
        self.query = query
        self.used: set[str] = set()

    @classmethod
    def load(cls, path: Path) -> _EtagCache:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("version") == _SIDECAR_VERSION and isinstance(data.get("pages"), dict):
                return cls(data["pages"], data.get("repo"), data.get("query"))
        except (OSError, ValueError, AttributeError):
            pass  # a cache only: unreadable means empty
        return cls({}, None, None)

    def same_query(self, repo: str, query: dict[str, Any]) -> bool:
        return self.repo == repo and self.query == query

    def get(self, url: str) -> dict[str, Any] | None:
        entry = self.entries.get(url)
        if isinstance(entry, dict) and isinstance(entry.get("etag"), str) and isinstance(entry.get("items"), list):
            return entry
        return None

    def put(self, url: str, etag: str, next_url: str | None, items: list[dict[str, Any]]) -> None:
        self.entries[url] = {"etag": etag, "next": next_url, "items": items}
        self.used.add(url)

    def touch(self, url: str) -> None:
        self.used.add(url)

    def save(self, path: Path, repo: str, query: dict[str, Any], *, prune: bool) -> None:
        """Keep what this run used (all entries after an interrupted run, whose unvisited pages still count)."""
        pages = {url: entry for url, entry in self.entries.items() if not prune or url in self.used}
        data = {"version": _SIDECAR_VERSION, "repo": repo, "query": query, "pages": pages}
        _atomic_write(path, json.dumps(data, ensure_ascii=False, separators=(",", ":")))


class _Session:
    """GETs against the API with the token, conditional requests, rate-limit waits and retries."""

    def __init__(
        self,
        http: httpx.Client,
        api: str,
        token: str | None,
        sleep: Callable[[float], None],
        max_wait: float,
        retries: int,
        backoff: float,
        cache: _EtagCache,
        stats: _Stats,
    ) -> None:
        self.http = http
        self.api = api
        self.origin = _origin(api)
        self.token = token
        self.sleep = sleep
        self.max_wait = max_wait
        self.retries = max(0, retries)
        self.backoff = backoff
        self.cache = cache
        self.stats = stats
        self.headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "vllm-advisor",
        }
        if token:
            self.headers["Authorization"] = f"Bearer {token}"

    def pages(self, url: str, params: dict[str, str], *, kind: str, what: str) -> Iterator[dict[str, Any]]:
        """Every item of a paginated listing, slimmed to the fields we keep, page after page."""
        next_url: str | None = str(httpx.URL(url, params=params))
        while next_url:
            items, next_url = self._page(next_url, kind, what)
            yield from items

    def _page(self, url: str, kind: str, what: str) -> tuple[list[dict[str, Any]], str | None]:
        cached = self.cache.get(url)
        headers = dict(self.headers)
        if cached:
            headers["If-None-Match"] = cached["etag"]
        response = self._get(url, headers, what)
        self.stats.pages += 1
        if response.status_code == 304:
            if not cached:
                raise self._error(f"GitHub answered 304 Not Modified for {what} to a request that was not conditional")
            self.stats.not_modified += 1
            self.cache.touch(url)
            return cached["items"], cached.get("next")
        try:
            data = response.json()
        except ValueError:
            raise self._error(f"the answer for {what} is not JSON (a proxy or login page?)") from None
        if not isinstance(data, list):
            said = _github_message(response) or type(data).__name__
            raise self._error(f"the answer for {what} is not a list of {kind}s ({said})")
        slim = _slim_issue if kind == "issue" else _slim_comment
        items = [slim(item, what, self._error) for item in data]
        next_url = self._next_link(response, url)
        etag = response.headers.get("etag")
        if etag:
            self.cache.put(url, etag, next_url, items)
        return items, next_url

    def _next_link(self, response: httpx.Response, url: str) -> str | None:
        link = response.links.get("next", {}).get("url")
        if not link:
            return None
        target = str(httpx.URL(url).join(link))
        if _origin(target) != self.origin:
            raise self._error(f"a pagination link points to another host ({_origin(target)}); refusing to send the token there")
        return target

    def _get_bounded(self, url: str, headers: dict[str, str], what: str) -> httpx.Response:
        """One GET whose body is streamed and stopped at _MAX_ANSWER_BYTES and at a total deadline
        (the client's timeout is per read: a server that drips bytes would hold the fetch forever)."""
        timeout = self.http.timeout.read or 30.0
        deadline = time.monotonic() + max(timeout, 1.0) * 4
        with self.http.stream("GET", url, headers=headers) as response:
            chunks, size = [], 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > _MAX_ANSWER_BYTES:
                    raise self._error(f"the answer for {what} is over {_MAX_ANSWER_BYTES // 2**20} MiB; not an API page")
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout(f"the answer for {what} took longer than {max(timeout, 1.0) * 4:g} s")
                chunks.append(chunk)
        # the body is decoded already: the copy must not claim an encoding or the old length
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
        return httpx.Response(response.status_code, headers=headers, content=b"".join(chunks), request=response.request)

    def _get(self, url: str, headers: dict[str, str], what: str) -> httpx.Response:
        failures = 0
        rate_waits = 0
        while True:
            try:
                response = self._get_bounded(url, headers, what)
            except httpx.TimeoutException as exc:
                failure = f"no answer in time from the GitHub API at {_display(self.api)} ({type(exc).__name__})"
            except httpx.TransportError as exc:
                failure = f"cannot connect to the GitHub API at {_display(self.api)} ({type(exc).__name__})"
            else:
                status = response.status_code
                if status < 300 or status == 304:
                    return response
                wait = self._rate_limit_wait(response, rate_waits)
                if wait is not None:
                    rate_waits += 1
                    if rate_waits > 5:
                        raise self._error(f"still rate limited after {rate_waits - 1} waits for {what}; try again later")
                    self._wait_for_limit(wait, response)
                    continue
                if status == 404:
                    raise _NotFound(what)
                if status < 500:
                    raise self._client_error(response, what)
                failure = f"the GitHub API answered HTTP {status}"
            failures += 1
            if failures > self.retries:
                tries = f" (tried {failures} times)" if failures > 1 else ""
                raise self._error(f"{failure} for {what}{tries}")
            self.stats.retries += 1
            self.sleep(self.backoff * 2 ** (failures - 1))

    def _rate_limit_wait(self, response: httpx.Response, earlier_waits: int) -> float | None:
        """Seconds to wait before retrying, or None when the answer is not a rate limit (GitHub's order)."""
        if response.status_code not in (403, 429):
            return None
        headers = response.headers
        retry_after = headers.get("retry-after")
        if retry_after:
            seconds = _retry_after_seconds(retry_after, _server_now(response))
            if seconds is not None:
                return seconds
        if headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset", "").strip().isdigit():
            reset = int(headers["x-ratelimit-reset"])
            return max(0.0, reset - _server_now(response)) + 1.0
        if response.status_code == 429 or "rate limit" in _github_message(response).lower():
            return 60.0 * 2**earlier_waits  # GitHub: wait at least a minute, then longer
        return None

    def _wait_for_limit(self, seconds: float, response: httpx.Response) -> None:
        if seconds > self.max_wait:
            resets = datetime.fromtimestamp(time.time() + seconds, tz=timezone.utc).strftime("%H:%M UTC")
            hint = (
                "wait and run again (it resumes where it stopped)"
                if self.token
                else "set GITHUB_TOKEN for 5,000 requests an hour instead of 60, or wait and run again"
            )
            primary = response.headers.get("x-ratelimit-remaining") == "0" and not response.headers.get("retry-after")
            which = "GitHub API rate limit exhausted" if primary else "GitHub's secondary rate limit asks to wait"
            raise self._error(
                f"{which}: it resets at {resets} (in {seconds / 60:.0f} min, "
                f"longer than the {self.max_wait / 60:g} min this run waits); {hint}"
            )
        self.stats.rate_limit_waits += 1
        self.stats.rate_limit_wait_s += seconds
        self.sleep(seconds)

    def _client_error(self, response: httpx.Response, what: str) -> GitHubFetchError:
        status = response.status_code
        said = _github_message(response)
        said_part = f": {said}" if said else ""
        if status == 401:
            if self.token:
                return self._error(f"GitHub rejected the token (HTTP 401{said_part}); check GITHUB_TOKEN / GH_TOKEN")
            return self._error(f"GitHub asks for authentication (HTTP 401{said_part}); set GITHUB_TOKEN")
        if status == 403:
            hint = "the token lacks access" if self.token else "set GITHUB_TOKEN"
            return self._error(f"GitHub refused access to {what} (HTTP 403{said_part}); {hint}")
        if status == 422:
            return self._error(f"GitHub refused the query for {what} (HTTP 422{said_part}); check the labels and since")
        return self._error(f"GitHub answered HTTP {status} for {what}{said_part}")

    def _error(self, message: str) -> GitHubFetchError:
        if self.token:
            message = message.replace(self.token, "***")
        return GitHubFetchError(message)


def _slim_issue(item: Any, what: str, error: Callable[[str], GitHubFetchError]) -> dict[str, Any]:
    """The fields a thread needs; GitHub's objects carry ~60 more (reactions, URLs, node ids)."""
    if not isinstance(item, dict) or not isinstance(item.get("number"), int) or not isinstance(item.get("html_url"), str):
        raise error(f"an item in {what} has no number or html_url; not an issue object")
    comments = item.get("comments")
    return {
        "number": item["number"],
        "title": str(item.get("title") or ""),
        "body": item.get("body") or "",
        "html_url": item["html_url"],
        "state": str(item.get("state") or ""),
        "labels": [label.get("name", "") if isinstance(label, dict) else str(label) for label in item.get("labels") or []],
        "created_at": item.get("created_at"),
        "updated_at": item.get("updated_at"),
        "closed_at": item.get("closed_at"),
        "user": _login(item.get("user")),
        "comments": comments if isinstance(comments, int) else 0,
        "pull_request": "pull_request" in item,
    }


def _slim_comment(item: Any, what: str, error: Callable[[str], GitHubFetchError]) -> dict[str, Any]:
    if not isinstance(item, dict) or "body" not in item:
        raise error(f"an item in {what} has no body; not a comment object")
    return {"user": _login(item.get("user")), "body": item.get("body") or "", "created_at": item.get("created_at")}


def _issue_record(item: dict[str, Any]) -> dict[str, Any]:
    """A listed issue as a JSONL line (comments filled in by the caller)."""
    keys = ("number", "title", "body", "html_url", "state", "labels", "created_at", "updated_at", "closed_at", "user")
    record = {key: item[key] for key in keys}
    record["comments"] = []
    if item["pull_request"]:
        record["pull_request"] = True
    return record


def _login(user: Any) -> str:
    """The author's login; GitHub sends null for deleted accounts, which its UI shows as "ghost"."""
    if isinstance(user, dict) and isinstance(user.get("login"), str):
        return user["login"]
    return "ghost"


def _github_message(response: httpx.Response) -> str:
    """GitHub's own ``message`` field, one line and short; "" when the body has none."""
    try:
        data = response.json()
    except ValueError:
        return ""
    message = data.get("message") if isinstance(data, dict) else None
    if not isinstance(message, str):
        return ""
    message = " ".join(message.split())
    return message if len(message) <= 200 else message[:200] + "..."


def _server_now(response: httpx.Response) -> float:
    """The server's clock from its ``Date`` header (rate-limit resets are in its time), else ours."""
    date = response.headers.get("date")
    if date:
        try:
            return parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError, IndexError):
            pass
    return time.time()


def _retry_after_seconds(value: str, now: float) -> float | None:
    """``Retry-After`` is seconds or an HTTP date."""
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError, IndexError):
        return None


def _origin(url: str) -> tuple[str, str, int | None]:
    parsed = httpx.URL(url)
    return (parsed.scheme, parsed.host, parsed.port)


def _display(url: str) -> str:
    """A URL fit for a message: no credentials, no query."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _existing_threads(out: Path, repo: str) -> dict[int, dict[str, Any]]:
    """The threads already in the output file, by number; they must be from the same repository."""
    if not out.exists():
        return {}
    if out.stat().st_size == 0:
        return {}
    threads: dict[int, dict[str, Any]] = {}
    for line_no, record in _read_records(out):
        other = _repo_of(record["html_url"])
        if other.lower() != repo.lower():
            raise GitHubFetchError(f"{out} holds issues of {other} (line {line_no}), not {repo}; choose another output file")
        threads[record["number"]] = record
    return threads


def _write_jsonl(out: Path, threads: dict[int, dict[str, Any]]) -> None:
    lines = (json.dumps(threads[number], ensure_ascii=False) + "\n" for number in sorted(threads))
    _atomic_write(out, "".join(lines))


def _atomic_write(path: Path, text: str) -> None:
    """Write next to ``path`` and move into place, so no reader ever sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---------------------------------------------------------------------------------------------
# read


def load_issue_threads(path: Path, *, max_block_lines: int = 40, max_post_chars: int = 12_000) -> list[SourceDocument]:
    """One :class:`SourceDocument` per thread of an issues JSONL file (as :func:`fetch_issues` writes).

    A number seen twice (concatenated files) keeps the line with the latest ``updated_at``.
    Raises :class:`IssueFileError` naming the file and line for anything unreadable.
    """
    source = Path(path)
    latest: dict[str, dict[str, Any]] = {}
    for _, record in _read_records(source):
        repo = _repo_of(record["html_url"])
        doc_id = f"issue:{repo}#{record['number']}"
        seen = latest.get(doc_id)
        if seen is None or str(record["updated_at"]) >= str(seen["updated_at"]):
            latest[doc_id] = record
    return [_document(doc_id, record, max_block_lines, max_post_chars) for doc_id, record in latest.items()]


def render_thread(record: dict[str, Any], *, max_block_lines: int = 40, max_post_chars: int = 12_000) -> str:
    """The thread as Markdown text: title, header line, body, then the comments (trimmed, see module doc)."""
    labels = ", ".join(record["labels"]) or "none"
    header = (
        f"Issue #{record['number']} · {record['state'] or 'unknown state'} · labels: {labels}"
        f" · opened {_day(record['created_at'])} by {record['user']}"
    )
    if record.get("closed_at"):
        header += f" · closed {_day(record['closed_at'])}"
    header += f" · updated {_day(record['updated_at'])}"
    body = _clean_post(record["body"], max_block_lines, max_post_chars)
    parts = [f"# {record['title']}", "", header, "", body or "(no description)"]
    if record["comments"]:
        parts += ["", f"## Comments ({len(record['comments'])})"]
        for comment in record["comments"]:
            text = _clean_post(comment["body"], max_block_lines, max_post_chars)
            starts_block = re.match(r"\s*(```|~~~|#|>|[-*+] |\d+\. |\||<)", text) is not None
            parts += ["", f"**{comment['user']}** ({_day(comment['created_at'])}):{chr(10) if starts_block else ' '}{text}"]
    return "\n".join(parts).strip() + "\n"


def _document(doc_id: str, record: dict[str, Any], max_block_lines: int, max_post_chars: int) -> SourceDocument:
    repo = doc_id.removeprefix("issue:").rsplit("#", 1)[0]
    metadata = {
        "number": record["number"],
        "state": record["state"],
        "labels": list(record["labels"]),
        "created_at": record["created_at"],
        "updated_at": record["updated_at"],
        "closed_at": record.get("closed_at"),
        "repo": repo,
        "comments": len(record["comments"]),
        "user": record["user"],
    }
    if record.get("pull_request"):
        metadata["pull_request"] = True
    return SourceDocument(
        doc_id=doc_id,
        kind="issue",
        title=f"#{record['number']} {record['title']}",
        url=record["html_url"],
        text=render_thread(record, max_block_lines=max_block_lines, max_post_chars=max_post_chars),
        version=None,
        metadata=metadata,
    )


def _read_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, validated record) for each non-blank line; IssueFileError for the first bad one."""
    if not path.exists():
        raise IssueFileError(f"{path}: file not found")
    if not path.is_file():
        raise IssueFileError(f"{path}: not a file")
    count = 0
    try:
        with path.open("rb") as handle:
            if b"\x00" in handle.read(8192):
                raise IssueFileError(f"{path}: binary file, not issues JSONL")
            handle.seek(0)
            for line_no, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise IssueFileError(f"{path}: line {line_no}: not UTF-8 text") from None
                try:
                    record = json.loads(text)
                except ValueError as exc:
                    raise IssueFileError(f"{path}: line {line_no}: not JSON ({exc.msg})") from None
                yield line_no, _check_record(record, path, line_no)
                count += 1
    except OSError as exc:
        raise IssueFileError(f"{path}: cannot read ({exc.strerror or type(exc).__name__})") from None
    if count == 0:
        raise IssueFileError(f"{path}: no issues in the file (empty); fetch some with fetch-issues first")


def _check_record(record: Any, path: Path, line_no: int) -> dict[str, Any]:
    where = f"{path}: line {line_no}"
    if not isinstance(record, dict):
        raise IssueFileError(f"{where}: not a JSON object (an issue thread per line expected)")
    number = record.get("number")
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise IssueFileError(f"{where}: field 'number' missing or not a positive integer")
    for name in ("title", "html_url", "created_at", "updated_at"):
        if not isinstance(record.get(name), str) or not record[name]:
            raise IssueFileError(f"{where}: field '{name}' missing or not a string")
    if not _ISSUE_URL_RE.match(record["html_url"]):
        raise IssueFileError(f"{where}: field 'html_url' is not a GitHub issue URL ({record['html_url'][:100]})")
    labels = record.get("labels", [])
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise IssueFileError(f"{where}: field 'labels' is not a list of names")
    comments = record.get("comments", [])
    if not isinstance(comments, list) or not all(isinstance(c, dict) and isinstance(c.get("body", ""), str) for c in comments):
        raise IssueFileError(f"{where}: field 'comments' is not a list of comment objects")
    body = record.get("body")
    if body is not None and not isinstance(body, str):
        raise IssueFileError(f"{where}: field 'body' is not a string")
    return {
        "number": number,
        "title": record["title"],
        "body": body or "",
        "html_url": record["html_url"],
        "state": str(record.get("state") or ""),
        "labels": labels,
        "created_at": record["created_at"],
        "updated_at": record["updated_at"],
        "closed_at": record.get("closed_at"),
        "user": str(record.get("user") or "ghost"),
        "comments": [
            {"user": str(c.get("user") or "ghost"), "body": c.get("body") or "", "created_at": str(c.get("created_at") or "")}
            for c in comments
        ],
        **({"pull_request": True} if record.get("pull_request") else {}),
    }


def _repo_of(html_url: str) -> str:
    match = _ISSUE_URL_RE.match(html_url)
    if not match:
        raise IssueFileError(f"not a GitHub issue URL: {html_url[:100]}")
    return match.group(1)


def _day(timestamp: str | None) -> str:
    return (timestamp or "?")[:10]


# ---------------------------------------------------------------------------------------------
# trimming pasted logs

_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HTML_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)
#: terminal colour codes that pasted logs keep (``ESC[0;36m``)
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: vLLM's issue templates end with this checklist; it is in every thread and says nothing about it
_VLLM_CHECKLIST_RE = re.compile(r"^#{1,6}[ \t]*Before submitting a new issue.*?(?=^#{1,6}[ \t]|\Z)", re.DOTALL | re.MULTILINE)
_BLOCK_HEAD_LINES = 10
_BLOCK_TAIL_LINES = 20
_BLOCK_LINE_CHARS = 500


def _clean_post(text: str, max_block_lines: int, max_post_chars: int) -> str:
    """A body or comment with template noise removed and long pasted blocks cut (see module doc)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _ANSI_RE.sub("", _HTML_COMMENT_RE.sub("", text))
    text = _VLLM_CHECKLIST_RE.sub("", text)
    text = _trim_fenced_blocks(text, max_block_lines)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    if len(text) > max_post_chars:
        text = _cut_middle(text, max_post_chars)
    return text


def _trim_fenced_blocks(text: str, max_block_lines: int) -> str:
    """Fenced blocks over ``max_block_lines`` keep head and tail around a marker; an unclosed fence runs to the end."""
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        opener = _FENCE_RE.match(lines[i])
        if not opener:
            out.append(lines[i])
            i += 1
            continue
        fence = opener.group(1)
        end = i + 1
        while end < len(lines) and not re.match(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[end]):
            end += 1
        inner = [line if len(line) <= _BLOCK_LINE_CHARS else line[:_BLOCK_LINE_CHARS] + " [...]" for line in lines[i + 1 : end]]
        if len(inner) > max_block_lines:
            head = min(_BLOCK_HEAD_LINES, max_block_lines // 2)
            tail = min(_BLOCK_TAIL_LINES, max_block_lines - head)
            cut = len(inner) - head - tail
            inner = inner[:head] + [f"[... {cut} lines cut ...]"] + inner[len(inner) - tail :]
        out.append(lines[i])
        out.extend(inner)
        out.append(lines[end] if end < len(lines) else fence)
        i = end + 1
    return "\n".join(out)


def _cut_middle(text: str, max_chars: int) -> str:
    """Keep about two thirds of the budget from the start and one third from the end, cut at line ends."""
    head = text[: max_chars * 2 // 3].rsplit("\n", 1)[0]
    tail = text[len(text) - max_chars // 3 :].split("\n", 1)[-1]
    cut = len(text) - len(head) - len(tail)
    fences = sum(1 for line in head.split("\n") if _FENCE_RE.match(line))
    closing = "\n```" if fences % 2 else ""
    reopening = "```\n" if sum(1 for line in tail.split("\n") if _FENCE_RE.match(line)) % 2 else ""
    return f"{head}{closing}\n\n[... {cut} characters cut ...]\n\n{reopening}{tail}"
