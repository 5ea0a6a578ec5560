"""fetch_issues / load_issue_threads against a real local HTTP server that answers like GitHub's REST API.

The fake serves 250 items of ``vllm-project/vllm`` (every 10th a pull request) with the fields GitHub's
"List repository issues" and "List issue comments" endpoints return, honours ``state``, ``labels``,
``since``, ``sort=updated``, ``direction``, ``per_page`` and ``page``, answers ``Link`` headers, weak ETags
and 304s, and can be told to answer the next requests with errors or rate limits. Nothing in httpx is
mocked; ``sleep`` is injected so rate-limit and backoff waits are recorded instead of slept.
One thread carries a real vLLM server log (../shared/fixtures/real-logs) pasted in a fenced block.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from vllm_advisor_knowledge.github_issues import (
    FetchInterrupted,
    GitHubFetchError,
    IssueFileError,
    fetch_issues,
    load_issue_threads,
    normalize_repo,
    normalize_since,
    sidecar_path,
)

REPO = "vllm-project/vllm"
TOKEN = "ghp_TestTokenValue0123456789abcdefABCDEF"
LOG = "real-logs/guidellm-bench_gpt-oss-20b_tp4_vllm-server.log"
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
TEMPLATE_BODY = """### Your current environment

<details>
<summary>The output of <code>python collect_env.py</code></summary>

```text
vLLM Version: 0.10.0
```

</details>

### 🐛 Describe the bug

<!-- Please describe the bug; paste the full log. -->
With 8k-token prompts, every running generation stalls for about 10 s while the prompt is prefilled.

### Before submitting a new issue...

- [x] Make sure you already searched for relevant issues, and asked the chatbot living at the bottom of the [documentation page](https://docs.vllm.ai/en/latest/), which can answer lots of frequently asked questions.
"""


def _iso(hours: float) -> str:
    return (T0 + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _user(login: str) -> dict[str, Any]:
    uid = int(hashlib.sha1(login.encode()).hexdigest()[:6], 16)
    return {
        "login": login,
        "id": uid,
        "node_id": f"MDQ6VXNlcj{uid}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
        "gravatar_id": "",
        "html_url": f"https://github.com/{login}",
        "type": "User",
        "site_admin": False,
    }


@dataclass
class Scripted:
    status: int
    body: Any
    headers: dict[str, str]
    path_suffix: str


@dataclass
class Seen:
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    status: int = 0


@dataclass
class FakeGitHub:
    """The state behind the server: issues, comments, scripted answers and every request seen."""

    repo: str = REPO
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)  # number -> our description
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    script: list[Scripted] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    base: str = ""
    remaining: int = 5000
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, number: int, *, title: str, body: str = "", labels: tuple[str, ...] = (), updated_h: float, pr: bool = False,
            closed: bool = False, comments: list[str] | None = None) -> None:
        self.issues[number] = {"number": number, "title": title, "body": body, "labels": list(labels), "created_h": float(number),
                               "updated_h": updated_h, "pr": pr, "closed": closed}
        self.comments[number] = [
            {"login": f"maintainer{i % 3}" if i % 2 else f"user{i % 5}", "body": text, "at": _iso(updated_h - 1 + i / 1000)}
            for i, text in enumerate(comments or [])
        ]

    def answer_next(
        self, status: int, body: Any, headers: dict[str, str] | None = None, *, path_suffix: str = "/issues", times: int = 1
    ) -> None:
        self.script.extend(Scripted(status, body, headers or {}, path_suffix) for _ in range(times))

    # what GitHub would return -----------------------------------------------------------------

    def issue_json(self, d: dict[str, Any]) -> dict[str, Any]:
        n = d["number"]
        api = f"{self.base}/repos/{self.repo}/issues/{n}"
        kind = "pull" if d["pr"] else "issues"
        item: dict[str, Any] = {
            "url": api,
            "repository_url": f"{self.base}/repos/{self.repo}",
            "labels_url": f"{api}/labels{{/name}}",
            "comments_url": f"{api}/comments",
            "events_url": f"{api}/events",
            "html_url": f"https://github.com/{self.repo}/{kind}/{n}",
            "id": 2_000_000_000 + n,
            "node_id": f"I_kwDOJ{n:06d}",
            "number": n,
            "title": d["title"],
            "user": _user(f"user{n % 17}"),
            "labels": [
                {"id": 5_000_000 + i, "node_id": f"LA_kw{i}", "url": f"{self.base}/repos/{self.repo}/labels/{name}", "name": name,
                 "color": "d73a4a", "default": name == "bug", "description": ""}
                for i, name in enumerate(d["labels"])
            ],
            "state": "closed" if d["closed"] else "open",
            "locked": False,
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "comments": len(self.comments[n]),
            "created_at": _iso(d["created_h"]),
            "updated_at": _iso(d["updated_h"]),
            "closed_at": _iso(d["updated_h"]) if d["closed"] else None,
            "author_association": "NONE",
            "active_lock_reason": None,
            "body": d["body"] or None,
            "reactions": {"url": f"{api}/reactions", "total_count": 0, "+1": 0, "-1": 0, "laugh": 0, "hooray": 0, "confused": 0,
                          "heart": 0, "rocket": 0, "eyes": 0},
            "timeline_url": f"{api}/timeline",
            "performed_via_github_app": None,
            "state_reason": "completed" if d["closed"] else None,
        }
        if d["pr"]:
            item["draft"] = False
            item["pull_request"] = {"url": f"{self.base}/repos/{self.repo}/pulls/{n}", "html_url": item["html_url"],
                                    "diff_url": f"{item['html_url']}.diff", "patch_url": f"{item['html_url']}.patch", "merged_at": None}
        return item

    def comment_json(self, n: int, i: int, c: dict[str, Any]) -> dict[str, Any]:
        cid = 3_000_000_000 + n * 1000 + i
        return {
            "url": f"{self.base}/repos/{self.repo}/issues/comments/{cid}",
            "html_url": f"https://github.com/{self.repo}/issues/{n}#issuecomment-{cid}",
            "issue_url": f"{self.base}/repos/{self.repo}/issues/{n}",
            "id": cid,
            "node_id": f"IC_kwDO{cid}",
            "user": _user(c["login"]),
            "created_at": c["at"],
            "updated_at": c["at"],
            "author_association": "MEMBER" if c["login"].startswith("maintainer") else "NONE",
            "body": c["body"],
            "reactions": {"url": f"{self.base}/repos/{self.repo}/issues/comments/{cid}/reactions", "total_count": 0},
            "performed_via_github_app": None,
        }

    def listing(self, query: dict[str, str]) -> list[dict[str, Any]]:
        """The filter and order GitHub applies: state, all labels, updated at or after since, sorted."""
        state = query.get("state", "open")
        wanted = {name for name in query.get("labels", "").split(",") if name}
        since = query.get("since")
        items = [
            d for d in self.issues.values()
            if (state == "all" or (state == "closed") == d["closed"])
            and wanted <= set(d["labels"])
            and (since is None or _iso(d["updated_h"]) >= since)
        ]
        key = (lambda d: (d["updated_h"], d["number"])) if query.get("sort") == "updated" else (lambda d: d["created_h"])
        items.sort(key=key, reverse=query.get("direction", "desc") == "desc")
        return [self.issue_json(d) for d in items]


class _Server(ThreadingHTTPServer):
    daemon_threads = True


@contextmanager
def serve(fake: FakeGitHub) -> Iterator[str]:
    """A real HTTP server on a free local port answering in GitHub's shape; yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            parts = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            seen = Seen(parts.path, query, dict(self.headers))
            with fake.lock:
                fake.seen.append(seen)
                status, body, extra = self.route(parts.path, query)
            seen.status = status
            payload = b"" if body is None else json.dumps(body).encode()
            etag = 'W/"' + hashlib.sha256(payload).hexdigest()[:32] + '"'
            if status == 200 and self.headers.get("If-None-Match") == etag:
                status, payload = 304, b""
                seen.status = 304
            self.send_response(status)
            if status != 304:
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(payload)))
            if status in (200, 304):
                self.send_header("ETag", etag)
            authed = "Authorization" in self.headers
            if status != 304 and "X-RateLimit-Remaining" not in extra:
                fake.remaining -= 1
            rate = {"X-RateLimit-Limit": "5000" if authed else "60", "X-RateLimit-Remaining": str(max(fake.remaining, 0)),
                    "X-RateLimit-Reset": str(int(time.time()) + 3600), "X-RateLimit-Resource": "core",
                    "X-GitHub-Api-Version-Selected": "2022-11-28"}
            for name, value in {**rate, **extra}.items():
                self.send_header(name, value)
            self.end_headers()
            if payload:
                self.wfile.write(payload)

        def route(self, path: str, query: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
            for i, scripted in enumerate(fake.script):
                if path.endswith(scripted.path_suffix):
                    del fake.script[i]
                    return scripted.status, scripted.body, scripted.headers
            prefix = f"/repos/{fake.repo}/issues"
            not_found = {"message": "Not Found", "documentation_url": "https://docs.github.com/rest/issues/issues#list-repository-issues", "status": "404"}
            if not path.startswith(prefix):
                return 404, not_found, {}
            rest = path[len(prefix):]
            if rest == "":
                items = fake.listing(query)
            elif rest.endswith("/comments") and rest[1:-len("/comments")].isdigit():
                n = int(rest[1:-len("/comments")])
                if n not in fake.issues:
                    return 404, not_found, {}
                items = [fake.comment_json(n, i, c) for i, c in enumerate(fake.comments[n])]
            else:
                return 404, not_found, {}
            per_page = min(int(query.get("per_page", 30)), 100)
            page = int(query.get("page", 1))
            last = max(1, -(-len(items) // per_page))
            links = []

            def link(p: int, rel: str) -> str:
                return f'<{fake.base}{path}?{urlencode({**query, "page": str(p)})}>; rel="{rel}"'

            if page > 1:
                links += [link(page - 1, "prev"), link(1, "first")]
            if page < last:
                links += [link(page + 1, "next"), link(last, "last")]
            headers = {"Link": ", ".join(links)} if links else {}
            return 200, items[(page - 1) * per_page : page * per_page], headers

        def log_message(self, *args: Any) -> None:
            pass

    server = _Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    fake.base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake.base
    finally:
        server.shutdown()
        server.server_close()


def build_fake(shared_dir: Path) -> FakeGitHub:
    """250 items: every 10th a PR; #7 has 150 comments (two pages); #12 the vLLM bug template; #21 a real log."""
    fake = FakeGitHub()
    kinds = ("[Bug]", "[Performance]", "[Usage]")
    for n in range(1, 251):
        labels = tuple(name for name, every in (("performance", 3), ("bug", 5)) if n % every == 0)
        comments = [f"+1, same on H100 ({n})", f"Try --max-num-batched-tokens 8192 ({n})"] if n % 10 == 0 else None
        fake.add(n, title=f"{kinds[n % 3]}: slow decode with long prompts, case {n}", body=f"Description of case {n}.",
                 labels=labels, updated_h=300 + (n * 37) % 250, pr=n % 10 == 0, closed=n % 4 == 0, comments=comments)
    fake.comments[7] = [
        {"login": f"user{i % 5}" if i % 2 else "maintainer1", "body": f"comment {i} on #7", "at": _iso(400 + i / 100)}
        for i in range(150)
    ]
    fake.add(12, title="[Performance]: long prompts block running decodes", body=TEMPLATE_BODY, labels=("performance", "bug"),
             updated_h=fake.issues[12]["updated_h"], closed=True, comments=[
                 "Which version?",
                 "```\nINFO 01-02 10:00:00 engine.py:267] Avg prompt throughput: 8123.4 tokens/s\n```\nstill the same after upgrade",
                 "Enable chunked prefill: `--enable-chunked-prefill --max-num-batched-tokens 2048` lets decodes run between prefill chunks.",
             ])
    log = (shared_dir / "fixtures" / LOG).read_text(encoding="utf-8")
    fake.add(21, title="[Bug]: gpt-oss-20b on XPU, TP=4: slow first token", labels=("bug",), updated_h=fake.issues[21]["updated_h"],
             body=f"Server log:\n\n```text\n{log.rstrip(chr(10))}\n```\n\nAnything wrong in the config?", comments=["Looks fine to me."])
    return fake


@pytest.fixture
def fake(shared_dir: Path, monkeypatch: pytest.MonkeyPatch) -> FakeGitHub:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    return build_fake(shared_dir)


class Sleeps(list):
    """The injected sleep: records the seconds instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _listings(fake: FakeGitHub) -> list[Seen]:
    return [s for s in fake.seen if s.path == f"/repos/{REPO}/issues"]


def _expected_numbers(fake: FakeGitHub, *, include_prs: bool = False) -> list[int]:
    return sorted(n for n, d in fake.issues.items() if include_prs or not d["pr"])


# ---------------------------------------------------------------------------------------------
# fetching


def test_fetch_paginates_skips_prs_and_collects_comments(fake: FakeGitHub, tmp_path: Path) -> None:
    out = tmp_path / "issues.jsonl"
    progress: list[tuple[int, int | None]] = []
    with serve(fake) as base:
        result = fetch_issues(REPO, out, api_url=base, on_progress=lambda done, total: progress.append((done, total)), sleep=Sleeps())

    listings = _listings(fake)
    assert [s.query.get("page") for s in listings] == [None, "2", "3"]  # 250 items, 100 a page, Link rel="next"
    assert listings[0].query == {"state": "all", "sort": "updated", "direction": "asc", "per_page": "100"}
    head = listings[0].headers
    assert head["Accept"] == "application/vnd.github+json" and head["X-GitHub-Api-Version"] == "2022-11-28"
    assert head["User-Agent"] == "vllm-advisor" and "Authorization" not in head

    records = _lines(out)
    assert [r["number"] for r in records] == _expected_numbers(fake)  # 225 issues, sorted by number
    assert result.issues_written == result.issues_fetched == 225
    assert result.prs_skipped == 25
    assert progress[0] == (1, None) and progress[-1] == (225, None)

    comment_requests = [s for s in fake.seen if s.path.endswith("/comments")]
    # only issues with comments > 0, never the skipped PRs (#10, #20, ... carry 2 comments each)
    assert sorted({s.path for s in comment_requests}) == [f"/repos/{REPO}/issues/{n}/comments" for n in (12, 21, 7)]
    assert [s.query.get("page") for s in comment_requests if s.path.endswith("/7/comments")] == [None, "2"]
    assert result.pages_fetched == 3 + 4 and result.not_modified == 0

    by_number = {r["number"]: r for r in records}
    seven = by_number[7]
    assert [c["body"] for c in seven["comments"]] == [f"comment {i} on #7" for i in range(150)]
    assert seven["comments"][0] == {"user": "maintainer1", "body": "comment 0 on #7", "created_at": "2025-01-17T16:00:00Z"}
    assert set(seven) == {"number", "title", "body", "html_url", "state", "labels", "created_at", "updated_at", "closed_at", "user", "comments"}
    twelve = by_number[12]
    assert twelve["labels"] == ["performance", "bug"] and twelve["html_url"] == f"https://github.com/{REPO}/issues/12"
    assert twelve["state"] == "closed" and twelve["closed_at"] == twelve["updated_at"] == _iso(300 + (12 * 37) % 250)
    assert twelve["user"] == "user12" and twelve["created_at"] == "2025-01-01T12:00:00Z"
    assert by_number[1]["comments"] == [] and by_number[1]["closed_at"] is None and by_number[1]["state"] == "open"


def test_include_prs_keeps_pull_requests_and_their_comments(fake: FakeGitHub, tmp_path: Path) -> None:
    out = tmp_path / "all.jsonl"
    with serve(fake) as base:
        result = fetch_issues(REPO, out, api_url=base, include_prs=True, sleep=Sleeps())
    records = {r["number"]: r for r in _lines(out)}
    assert sorted(records) == list(range(1, 251)) and result.prs_skipped == 0
    assert records[30]["pull_request"] is True and records[30]["html_url"] == f"https://github.com/{REPO}/pull/30"
    assert [c["body"] for c in records[30]["comments"]] == ["+1, same on H100 (30)", "Try --max-num-batched-tokens 8192 (30)"]
    assert "pull_request" not in records[31]


def test_labels_and_since_are_query_parameters(fake: FakeGitHub, tmp_path: Path) -> None:
    out = tmp_path / "perf.jsonl"
    with serve(fake) as base:
        fetch_issues(REPO, out, api_url=base, labels=["performance", "bug"], since="2025-01-20", state="open", sleep=Sleeps())
    query = _listings(fake)[0].query
    assert query["labels"] == "bug,performance" and query["since"] == "2025-01-20T00:00:00Z" and query["state"] == "open"
    expected = sorted(n for n, d in fake.issues.items() if not d["pr"] and not d["closed"] and {"performance", "bug"} <= set(d["labels"])
                      and _iso(d["updated_h"]) >= "2025-01-20T00:00:00Z")
    assert expected and [r["number"] for r in _lines(out)] == expected
    assert all({"performance", "bug"} <= set(r["labels"]) for r in _lines(out))


def test_second_run_is_conditional_and_answered_304(fake: FakeGitHub, tmp_path: Path) -> None:
    out = tmp_path / "issues.jsonl"
    with serve(fake) as base:
        first = fetch_issues(REPO, out, api_url=base, since="2025-01-01", token=TOKEN, sleep=Sleeps())
        before = out.read_bytes()
        first_requests = {s.path + str(sorted(s.query.items())): s for s in fake.seen}
        fake.seen.clear()
        second = fetch_issues(REPO, out, api_url=base, since="2025-01-01", token=TOKEN, sleep=Sleeps())
    assert out.read_bytes() == before
    assert len(fake.seen) == first.pages_fetched == second.pages_fetched == 7
    assert all(s.headers.get("If-None-Match", "").startswith('W/"') for s in fake.seen)  # GitHub's weak ETags, sent back verbatim
    assert all(s.status == 304 for s in fake.seen) and second.not_modified == 7
    assert {s.path + str(sorted(s.query.items())) for s in fake.seen} == set(first_requests)
    assert second.issues_written == 225
    sidecar = sidecar_path(out)
    assert sidecar.name == "issues.jsonl.etags.json" and TOKEN not in sidecar.read_text()


def test_changed_page_is_refetched_and_unchanged_pages_are_304(fake: FakeGitHub, tmp_path: Path) -> None:
    out = tmp_path / "issues.jsonl"
    with serve(fake) as base:
        fetch_issues(REPO, out, api_url=base, resume=False, sleep=Sleeps())
        fake.comments[21].append({"login": "maintainer2", "body": "Fixed by upgrading the driver.", "at": _iso(299)})
        fake.seen.clear()
        second = fetch_issues(REPO, out, api_url=base, resume=False, sleep=Sleeps())
    statuses = {(s.path.removeprefix(f"/repos/{REPO}"), s.query.get("page")): s.status for s in fake.seen}
    assert statuses == {
        ("/issues", None): 200,  # page 1 lists #21 with its new comment count: the ETag no longer matches
        ("/issues", "2"): 304,
        ("/issues", "3"): 304,
        ("/issues/21/comments", None): 200,
        ("/issues/12/comments", None): 304,
        ("/issues/7/comments", None): 304,
        ("/issues/7/comments", "2"): 304,
    }
    assert second.not_modified == 5 and second.pages_fetched == 7
    records = {r["number"]: r for r in _lines(out)}
    assert [c["body"] for c in records[21]["comments"]] == ["Looks fine to me.", "Fixed by upgrading the driver."]


def test_resume_asks_since_newest_update_and_merges(fake: FakeGitHub, tmp_path: Path) -> None:
    out = tmp_path / "issues.jsonl"
    with serve(fake) as base:
        fetch_issues(REPO, out, api_url=base, sleep=Sleeps())
        newest = max(r["updated_at"] for r in _lines(out))
        fake.issues[5]["title"] = "[Bug]: case 5, retitled"
        fake.issues[5]["updated_h"] = 600
        fake.add(251, title="[Performance]: new report", updated_h=601)
        fake.seen.clear()
        result = fetch_issues(REPO, out, api_url=base, sleep=Sleeps())
    assert result.resumed_since == newest
    assert _listings(fake)[0].query["since"] == newest
    records = {r["number"]: r for r in _lines(out)}
    assert len(records) == 226 and result.issues_written == 226
    assert records[5]["title"] == "[Bug]: case 5, retitled" and records[5]["updated_at"] == _iso(600)
    assert records[251]["title"] == "[Performance]: new report"
    # the thread updated last in run 1 is listed again (since is inclusive), plus #5 and #251
    assert result.issues_fetched == 3


def test_no_resume_when_the_query_changed(fake: FakeGitHub, tmp_path: Path) -> None:
    out = tmp_path / "issues.jsonl"
    with serve(fake) as base:
        fetch_issues(REPO, out, api_url=base, labels=["performance"], sleep=Sleeps())
        fake.seen.clear()
        result = fetch_issues(REPO, out, api_url=base, sleep=Sleeps())
    assert "since" not in _listings(fake)[0].query and result.resumed_since is None
    assert [r["number"] for r in _lines(out)] == _expected_numbers(fake)


def test_primary_rate_limit_waits_until_reset(fake: FakeGitHub, tmp_path: Path) -> None:
    out = tmp_path / "issues.jsonl"
    sleeps = Sleeps()
    reset = int(time.time()) + 2
    fake.answer_next(403, {"message": "API rate limit exceeded for 127.0.0.1. (But here's the good news: Authenticated requests get a higher rate limit.)",
                           "documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"},
                     {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset), "X-RateLimit-Limit": "60"})
    with serve(fake) as base:
        result = fetch_issues(REPO, out, api_url=base, sleep=sleeps)
    assert len(sleeps) == 1 and 2.0 <= sleeps[0] <= 4.0  # until the reset (server clock) plus 1 s
    assert result.rate_limit_waits == 1 and result.rate_limit_wait_s == sleeps[0]
    assert result.issues_written == 225


def test_secondary_rate_limit_honours_retry_after(fake: FakeGitHub, tmp_path: Path) -> None:
    sleeps = Sleeps()
    fake.answer_next(403, {"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
                           "documentation_url": "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"},
                     {"Retry-After": "7"}, path_suffix="/comments")
    with serve(fake) as base:
        result = fetch_issues(REPO, tmp_path / "i.jsonl", api_url=base, sleep=sleeps)
    assert sleeps == [7.0] and result.rate_limit_waits == 1 and result.issues_written == 225


def test_rate_limit_reset_too_far_keeps_what_was_fetched(fake: FakeGitHub, tmp_path: Path) -> None:
    out = tmp_path / "issues.jsonl"
    sleeps = Sleeps()
    page1 = fake.listing({"state": "all", "sort": "updated", "direction": "asc"})[:100]
    page1_issues = [item["number"] for item in page1 if "pull_request" not in item]

    def limit_after_page1(done: int, total: int | None) -> None:
        if done == len(page1_issues):  # the next request is page 2 of the listing: the limit is exhausted for an hour
            fake.answer_next(403, {"message": "API rate limit exceeded for user ID 1."},
                             {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 3600)})

    with serve(fake) as base, pytest.raises(GitHubFetchError) as exc:
        fetch_issues(REPO, out, api_url=base, sleep=sleeps, token=TOKEN, on_progress=limit_after_page1)
    message = str(exc.value)
    assert "GitHub API rate limit exhausted: it resets at " in message and " UTC (in 60 min, longer than the 15 min this run waits)" in message
    assert "run again" in message and TOKEN not in message and "\n" not in message
    assert sleeps == []  # never slept an hour
    assert _listings(fake)[-1].query["page"] == "2" and _listings(fake)[-1].status == 403
    assert exc.value.result is not None and exc.value.result.interrupted
    assert [r["number"] for r in _lines(out)] == sorted(page1_issues)
    assert f"kept {len(page1_issues)} new or updated threads, {len(page1_issues)} in all" in message


def test_reset_too_far_without_token_says_set_github_token(fake: FakeGitHub, tmp_path: Path) -> None:
    fake.answer_next(403, {"message": "API rate limit exceeded for 127.0.0.1."},
                     {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 3600)})
    with serve(fake) as base, pytest.raises(GitHubFetchError, match="set GITHUB_TOKEN") as exc:
        fetch_issues(REPO, tmp_path / "i.jsonl", api_url=base, sleep=Sleeps())
    assert exc.value.result is None and not (tmp_path / "i.jsonl").exists()


def test_server_errors_are_retried_with_backoff(fake: FakeGitHub, tmp_path: Path) -> None:
    sleeps = Sleeps()
    fake.answer_next(500, {"message": "Server Error"})
    fake.answer_next(502, None)
    with serve(fake) as base:
        result = fetch_issues(REPO, tmp_path / "i.jsonl", api_url=base, sleep=sleeps)
    assert sleeps == [1.0, 2.0] and result.retries == 2 and result.issues_written == 225


def test_server_errors_give_up_after_retries(fake: FakeGitHub, tmp_path: Path) -> None:
    sleeps = Sleeps()
    fake.answer_next(503, None, times=4)
    with serve(fake) as base, pytest.raises(GitHubFetchError) as exc:
        fetch_issues(REPO, tmp_path / "i.jsonl", api_url=base, sleep=sleeps)
    assert str(exc.value) == f"the GitHub API answered HTTP 503 for the issues of {REPO} (tried 4 times)"
    assert sleeps == [1.0, 2.0, 4.0]


def test_connection_refused_is_retried_then_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = Sleeps()
    with pytest.raises(GitHubFetchError) as exc:
        fetch_issues(REPO, tmp_path / "i.jsonl", api_url=f"http://127.0.0.1:{port}", token=TOKEN, sleep=sleeps, retries=2)
    assert str(exc.value) == f"cannot connect to the GitHub API at http://127.0.0.1:{port} (ConnectError) for the issues of {REPO} (tried 3 times)"
    assert sleeps == [1.0, 2.0]


def test_token_is_sent_as_bearer_and_rejected_token_message(fake: FakeGitHub, tmp_path: Path) -> None:
    with serve(fake) as base:
        fetch_issues(REPO, tmp_path / "ok.jsonl", api_url=base, token=TOKEN, max_issues=1, sleep=Sleeps())
        assert fake.seen[0].headers["Authorization"] == f"Bearer {TOKEN}"
        fake.answer_next(401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"})
        with pytest.raises(GitHubFetchError) as exc:
            fetch_issues(REPO, tmp_path / "bad.jsonl", api_url=base, token=TOKEN, sleep=Sleeps())
    assert str(exc.value) == "GitHub rejected the token (HTTP 401: Bad credentials); check GITHUB_TOKEN / GH_TOKEN"
    assert TOKEN not in str(exc.value)


def test_token_echoed_by_a_proxy_is_redacted(fake: FakeGitHub, tmp_path: Path) -> None:
    fake.answer_next(403, {"message": f"proxy: header 'Authorization: Bearer {TOKEN}' not allowed"})
    with serve(fake) as base, pytest.raises(GitHubFetchError) as exc:
        fetch_issues(REPO, tmp_path / "i.jsonl", api_url=base, token=TOKEN, sleep=Sleeps())
    assert TOKEN not in str(exc.value) and "Bearer ***" in str(exc.value)


def test_token_from_environment(fake: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GH_TOKEN", TOKEN)
    with serve(fake) as base:
        fetch_issues(REPO, tmp_path / "i.jsonl", api_url=base, max_issues=3, sleep=Sleeps())
        with pytest.raises(GitHubFetchError) as exc:
            fetch_issues("vllm-project/nothing-here", tmp_path / "n.jsonl", api_url=base, sleep=Sleeps())
    assert all(s.headers["Authorization"] == f"Bearer {TOKEN}" for s in fake.seen)
    assert str(exc.value) == "repository vllm-project/nothing-here not found (or the token cannot read it)"


def test_repository_not_found(fake: FakeGitHub, tmp_path: Path) -> None:
    with serve(fake) as base, pytest.raises(GitHubFetchError) as exc:
        fetch_issues("nobody/nothing", tmp_path / "i.jsonl", api_url=base, sleep=Sleeps())
    assert str(exc.value) == "repository nobody/nothing not found (or private: set GITHUB_TOKEN)"


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (422, {"message": "Validation Failed", "errors": [{"resource": "Issue", "field": "since", "code": "invalid"}]},
         f"GitHub refused the query for the issues of {REPO} (HTTP 422: Validation Failed); check the labels and since"),
        (403, {"message": "Resource not accessible by personal access token"},
         f"GitHub refused access to the issues of {REPO} (HTTP 403: Resource not accessible by personal access token); the token lacks access"),
        (200, {"message": "Moved Permanently"}, f"the answer for the issues of {REPO} is not a list of issues (Moved Permanently)"),
        (200, [{"id": 1}], f"an item in the issues of {REPO} has no number or html_url; not an issue object"),
    ],
)
def test_other_answers_are_one_line(fake: FakeGitHub, tmp_path: Path, status: int, body: Any, message: str) -> None:
    fake.answer_next(status, body)
    with serve(fake) as base, pytest.raises(GitHubFetchError) as exc:
        fetch_issues(REPO, tmp_path / "i.jsonl", api_url=base, token=TOKEN, sleep=Sleeps())
    assert str(exc.value) == message


def test_thread_deleted_after_listing_is_left_out(fake: FakeGitHub, tmp_path: Path) -> None:
    fake.answer_next(404, {"message": "Not Found"}, path_suffix="/12/comments")
    with serve(fake) as base:
        result = fetch_issues(REPO, tmp_path / "i.jsonl", api_url=base, sleep=Sleeps())
    numbers = [r["number"] for r in _lines(tmp_path / "i.jsonl")]
    assert 12 not in numbers and 21 in numbers and result.issues_written == 224


def test_pagination_link_to_another_host_is_refused(fake: FakeGitHub, tmp_path: Path) -> None:
    fake.answer_next(200, [], {"Link": '<http://elsewhere.example/repos/vllm-project/vllm/issues?page=2>; rel="next"'})
    with serve(fake) as base, pytest.raises(GitHubFetchError, match="another host") as exc:
        fetch_issues(REPO, tmp_path / "i.jsonl", api_url=base, token=TOKEN, sleep=Sleeps())
    assert len(fake.seen) == 1 and TOKEN not in str(exc.value)


def test_interrupt_keeps_fetched_threads_and_next_run_resumes(fake: FakeGitHub, tmp_path: Path) -> None:
    out = tmp_path / "issues.jsonl"
    full = tmp_path / "full.jsonl"

    def stop_at_120(done: int, total: int | None) -> None:
        if done == 120:
            raise KeyboardInterrupt

    with serve(fake) as base:
        with pytest.raises(FetchInterrupted) as exc:
            fetch_issues(REPO, out, api_url=base, on_progress=stop_at_120, sleep=Sleeps())
        kept = _lines(out)
        listed = fake.listing({"state": "all", "sort": "updated", "direction": "asc"})
        order = [item["number"] for item in listed if "pull_request" not in item]
        assert sorted(r["number"] for r in kept) == sorted(order[:120])  # the oldest-updated 120: a clean prefix
        assert exc.value.result.issues_written == 120 and exc.value.result.interrupted
        assert str(exc.value) == f"interrupted: kept 120 new or updated threads, 120 in all, in {out}; run again to resume"
        assert exc.value.exit_code == 130

        resumed = fetch_issues(REPO, out, api_url=base, sleep=Sleeps())
        fetch_issues(REPO, full, api_url=base, sleep=Sleeps())
    assert resumed.resumed_since == max(r["updated_at"] for r in kept)
    assert resumed.issues_written == 225 and out.read_bytes() == full.read_bytes()


def test_max_issues_stops_early(fake: FakeGitHub, tmp_path: Path) -> None:
    progress: list[tuple[int, int | None]] = []
    with serve(fake) as base:
        result = fetch_issues(REPO, tmp_path / "i.jsonl", api_url=base, max_issues=5, sleep=Sleeps(),
                              on_progress=lambda done, total: progress.append((done, total)))
    assert result.issues_written == 5 and progress[-1] == (5, 5) and len(_listings(fake)) == 1


def test_output_file_of_another_repository_is_refused(fake: FakeGitHub, tmp_path: Path) -> None:
    out = tmp_path / "issues.jsonl"
    with serve(fake) as base:
        fetch_issues(REPO, out, api_url=base, max_issues=2, sleep=Sleeps())
        with pytest.raises(GitHubFetchError, match=r"holds issues of vllm-project/vllm \(line 1\), not sgl-project/sglang"):
            fetch_issues("sgl-project/sglang", out, api_url=base, sleep=Sleeps())


def test_repo_and_since_are_checked_before_any_request() -> None:
    assert normalize_repo("https://github.com/vllm-project/vllm/") == REPO
    assert normalize_repo("vllm-project/vllm.git") == REPO
    with pytest.raises(GitHubFetchError, match="expected owner/name"):
        normalize_repo("vllm")
    assert normalize_since("2025-03-01") == "2025-03-01T00:00:00Z"
    assert normalize_since("2025-03-01T10:00:00+02:00") == "2025-03-01T08:00:00Z"
    assert normalize_since("2025-03-01T10:00:00Z") == "2025-03-01T10:00:00Z"
    with pytest.raises(GitHubFetchError, match="not an ISO 8601"):
        normalize_since("last week")
    with pytest.raises(GitHubFetchError, match="state must be"):
        fetch_issues(REPO, Path("unused.jsonl"), state="merged")


# ---------------------------------------------------------------------------------------------
# reading


def test_load_issue_threads_renders_one_document_per_thread(fake: FakeGitHub, tmp_path: Path, shared_dir: Path) -> None:
    out = tmp_path / "issues.jsonl"
    with serve(fake) as base:
        fetch_issues(REPO, out, api_url=base, sleep=Sleeps())
    docs = {d.doc_id: d for d in load_issue_threads(out)}
    assert len(docs) == 225

    doc = docs[f"issue:{REPO}#12"]
    assert doc.kind == "issue" and doc.version is None
    assert doc.title == "#12 [Performance]: long prompts block running decodes"
    assert doc.url == f"https://github.com/{REPO}/issues/12"
    assert doc.metadata == {"number": 12, "state": "closed", "labels": ["performance", "bug"], "created_at": "2025-01-01T12:00:00Z",
                            "updated_at": _iso(300 + (12 * 37) % 250), "closed_at": _iso(300 + (12 * 37) % 250), "repo": REPO,
                            "comments": 3, "user": "user12"}
    text = doc.text
    assert text.startswith("# [Performance]: long prompts block running decodes\n\nIssue #12 · closed · labels: performance, bug · opened 2025-01-01 by user12")
    assert "every running generation stalls for about 10 s" in text
    assert "Before submitting" not in text and "chatbot" not in text and "Please describe" not in text  # template noise
    assert "## Comments (3)" in text
    assert "**maintainer1** (2025-01-" in text and "Enable chunked prefill: `--enable-chunked-prefill" in text
    assert "**user0** (2025-01-" in text and "): Which version?" in text
    assert "):\n```\nINFO 01-02" in text  # a comment opening with a code block starts on its own line

    log_lines = (shared_dir / "fixtures" / LOG).read_text(encoding="utf-8").rstrip("\n").split("\n")
    log_doc = docs[f"issue:{REPO}#21"].text
    assert f"[... {len(log_lines) - 30} lines cut ...]" in log_doc  # 10 first + 20 last lines kept
    assert "oneAPI environment" in log_doc  # from the head of the real log
    assert re.sub(r"\x1b\[[0-9;]*m", "", log_lines[-1]) in log_doc  # the tail, where errors are
    assert len(log_doc) < 12_000 and "Anything wrong in the config?" in log_doc
    assert log_doc.count("```") == 2
    assert "\x1b" not in log_doc and "(APIServer pid=4912) INFO 03-02 17:35:15 [loggers.py:257]" in log_doc  # colour codes dropped

    seven = docs[f"issue:{REPO}#7"]
    assert seven.metadata["comments"] == 150 and seven.text.count("**") == 300


def test_load_trims_long_posts_and_keeps_latest_duplicate(tmp_path: Path) -> None:
    base = {"title": "t", "html_url": f"https://github.com/{REPO}/issues/9", "state": "open", "labels": [], "user": "a", "comments": [],
            "created_at": "2025-01-01T00:00:00Z"}
    long_body = "\n".join(f"paragraph {i} " + "x" * 80 for i in range(400))
    lines = [
        {**base, "number": 9, "body": "old", "updated_at": "2025-01-02T00:00:00Z"},
        {**base, "number": 9, "body": long_body, "updated_at": "2025-01-03T00:00:00Z"},
    ]
    path = tmp_path / "dup.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + "\n", encoding="utf-8")
    docs = load_issue_threads(path, max_post_chars=6000)
    assert len(docs) == 1 and docs[0].metadata["updated_at"] == "2025-01-03T00:00:00Z"
    text = docs[0].text
    assert "paragraph 0 " in text and "paragraph 399 " in text and "characters cut ...]" in text
    assert len(text) < 6000 + 400


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "no issues in the file (empty)"),
        (b"\n  \n", "no issues in the file (empty)"),
        (b'{"number": 1}\n', "line 1: field 'title' missing"),
        (b"[1, 2]\n", "line 1: not a JSON object"),
        (b'{"number": 1, "title": "a", "html_url": "https://example.com/x", "created_at": "a", "updated_at": "b"}\n',
         "line 1: field 'html_url' is not a GitHub issue URL"),
        (b"\x00\x01\x02binary", "binary file"),
        (b"\xff\xfe{}\n", "line 1: not UTF-8 text"),
    ],
)
def test_load_bad_files_name_the_problem(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(IssueFileError) as exc:
        load_issue_threads(path)
    assert message in str(exc.value) and str(path) in str(exc.value) and "\n" not in str(exc.value)


def test_load_bad_json_line_is_named(fake: FakeGitHub, tmp_path: Path) -> None:
    out = tmp_path / "issues.jsonl"
    with serve(fake) as base:
        fetch_issues(REPO, out, api_url=base, max_issues=4, sleep=Sleeps())
    lines = out.read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2][:40]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(IssueFileError, match=r"line 3: not JSON \("):
        load_issue_threads(out)
    with pytest.raises(IssueFileError, match="file not found"):
        load_issue_threads(tmp_path / "missing.jsonl")
