"""Coverage: for each list and each host, how many resources have full text, and why the rest do not.

A build that quietly indexes catalog cards instead of papers looks fine until someone asks a question
it should answer. The coverage table makes that visible: per list (as the lists name resources) and
per host (of the address requested), resources with full text, with the abstract of a landing page
only, and as catalog cards, with the failure reasons grouped into a few kinds a person can act on
(offline, HTTP 403, robots.txt, too large, ...). Pure functions of the build's own records.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from dmlqa.acquire.http import EARLIER
from dmlqa.models import Document, Failure, Resource

#: A resource's outcome in one build.
FULL_TEXT, ABSTRACT, CARD = "full_text", "abstract_only", "cards"

#: The note the build records when a landing page's PDF could not be had (only the abstract is indexed).
ABSTRACT_ONLY_NOTE = "full text unavailable, indexed the landing page's abstract"


def reason_kind(error: str) -> str:
    """A failure message grouped into a kind a person can act on (see :data:`Failure.error`)."""
    e = error.lower()
    if "not in the archive" in e or "offline" in e:
        return "offline (not in the archive)"
    if "dns lookup failed" in e:
        return "DNS lookup failed"
    if "robots.txt" in e:
        return "robots.txt"
    if "larger than" in e:
        return "too large"
    if "timed out" in e:
        return "timeout"
    if e.startswith("refused"):
        return "refused address"
    if ABSTRACT_ONLY_NOTE in e:
        return "paywall or missing PDF (abstract only)"
    m = re.search(r"\bhttp (\d{3})\b", e)
    if m:
        code = int(m.group(1))
        if code in (401, 402, 403, 451):
            return f"HTTP {code} (forbidden or paywall)"
        return f"HTTP {code}"
    if "tls" in e or "certificate" in e:
        return "TLS error"
    if "connect" in e or "network error" in e:
        return "connection failed"
    if "redirect" in e:
        return "redirects"
    return "no usable text"


@dataclass
class Tally:
    """Outcomes of a group of resources."""

    resources: int = 0
    full_text: int = 0
    abstract_only: int = 0
    cards: int = 0
    duplicates: int = 0  # resources that are copies of another resource's work (counted by its outcome)
    reasons: Counter = field(default_factory=Counter)  # why not full text: kind → count

    def add(self, outcome: str, reason: str | None, duplicate: bool) -> None:
        self.resources += 1
        setattr(self, outcome, getattr(self, outcome) + 1)
        self.duplicates += duplicate
        if reason is not None and outcome != FULL_TEXT:
            self.reasons[reason] += 1

    def to_json(self) -> dict[str, Any]:
        return {
            "resources": self.resources, "full_text": self.full_text, "abstract_only": self.abstract_only,
            "cards": self.cards, "duplicates": self.duplicates, "reasons": dict(self.reasons.most_common()),
        }


def host_of(url: str) -> str:
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return "(invalid)"
    return host.removeprefix("www.") or "(none)"


def coverage(
    resources: Sequence[Resource],
    documents: Sequence[Document],
    failures: Sequence[Failure],
    merged_into: Mapping[str, str],
) -> dict[str, Any]:
    """``{"total", "by_list", "by_host"}``: each a :class:`Tally` as JSON; groups sorted by size.

    ``merged_into`` maps a merged-away resource id to the id of the document that holds its work;
    a duplicate counts with the outcome of that document.
    """
    docs = {d.doc_id: d for d in documents}
    reasons: dict[str, str] = {}
    for f in failures:  # the last failure of an address is the one that decided its outcome
        reasons[f.url] = reason_kind(f.error)
    total, by_list, by_host = Tally(), {}, {}
    for res in resources:
        doc = docs.get(merged_into.get(res.id, res.id))
        reason = reasons.get(res.address) or reasons.get(res.url)
        if doc is None or doc.is_card:
            outcome = CARD
            reason = reason or "no usable text"
        elif reason is not None and reason.endswith("(abstract only)"):
            outcome = ABSTRACT
        else:
            outcome = FULL_TEXT
        dup = res.id in merged_into
        total.add(outcome, reason, dup)
        for name in res.lists or ("(no list)",):
            by_list.setdefault(name, Tally()).add(outcome, reason, dup)
        by_host.setdefault(host_of(res.address), Tally()).add(outcome, reason, dup)

    def ordered(groups: dict[str, Tally]) -> dict[str, Any]:
        return {k: v.to_json() for k, v in sorted(groups.items(), key=lambda kv: (-kv[1].resources, kv[0]))}

    return {"total": total.to_json(), "by_list": ordered(by_list), "by_host": ordered(by_host)}


#: Failure kinds (:func:`reason_kind`) that mean no server answered at all.
NO_ANSWER_KINDS = frozenset({"DNS lookup failed", "connection failed", "timeout"})


def no_network(failures: Sequence[Failure], fetched_ok: int, responses: int, saved_archives: int = 0) -> str | None:
    """The one line to stop a build with when it reached no server at all, else None.

    That is: nothing was fetched (``fetched_ok``: bytes or a 304, from the network or an archive), no
    HTTP answer came back to any request (``responses``, robots.txt and open-access look-ups included),
    and every fetch failure is a DNS, connect or timeout failure. Such a build would publish catalog
    cards and exit 0, which a scheduler reads as success. ``saved_archives`` (WARC files in the home)
    makes the line point at them.
    """
    fetch = [f for f in failures if f.stage == "fetch"]
    if fetched_ok or responses or not fetch or any(reason_kind(f.error) not in NO_ANSWER_KINDS for f in fetch):
        return None
    first = next((f for f in fetch if EARLIER not in f.error), fetch[0])  # the lookup itself, not its echo
    saved = f" (this home has {saved_archives} in corpus/archive/)" if saved_archives else ""
    return (f"no network: {len(fetch)} of {len(fetch)} fetches failed to resolve or connect "
            f"(first: {first.url}: {first.error}); check the connection, or build from saved pages with "
            f"`dmlqa build --offline --archive FILE.warc.gz`{saved}")
