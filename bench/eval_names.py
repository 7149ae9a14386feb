"""Refusal by name (dmlqa.query.names, then dmlqa.query.subjects) over the training questions: false refusals
and misses.

    python bench/eval_names.py --home /tmp/snaphome [--questions 'bench/train/questions-*.jsonl'] [--show]

Answerable questions must name nothing the index lacks (false refusal); unanswerable ones whose
``why`` lists absent names should be caught. Off-topic questions (``kind: off-topic``) name nothing of the
field: the off-topic check refuses them (dmlqa.query.topic); how many the name check catches first is
reported apart. Reads only the index (no retrieval, no model): the rule
needs the retrieved passages only as a shortcut, so its verdict is the same without them.
"""

from __future__ import annotations

import argparse
import glob
import json
from pathlib import Path

from dmlqa.index.versions import open_current
from dmlqa.query.names import unknown_names
from dmlqa.query.subjects import unknown_subject


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--questions", default="bench/train/questions-*.jsonl")
    ap.add_argument("--show", action="store_true", help="print every refusal and every miss")
    args = ap.parse_args()
    version = open_current(args.home / "index")
    questions = [json.loads(line) for f in sorted(glob.glob(args.questions)) for line in open(f) if line.strip()]
    false_refusals, caught, unanswerable, off_topic = [], [], [], []
    for q in questions:
        unknown = unknown_names(version, q["question"]) or unknown_subject(version, q["question"])
        if q.get("kind") == "off-topic":
            off_topic.append(bool(unknown))
            continue
        if q.get("answerable", True):
            if unknown:
                false_refusals.append((q["id"], q["question"], [u.name for u in unknown]))
        else:
            unanswerable.append(q["id"])
            if unknown:
                caught.append(q["id"])
            elif args.show:
                print("MISS", q["id"], q["question"])
        if args.show and unknown:
            print("REFUSE" if not q.get("answerable", True) else "FALSE ", q["id"],
                  [(u.name, u.near) for u in unknown], "|", q["question"])
    n_ans = len(questions) - len(unanswerable) - len(off_topic)
    print(json.dumps({
        "questions": len(questions), "answerable": n_ans, "unanswerable": len(unanswerable),
        "false_refusal_rate": round(len(false_refusals) / max(n_ans, 1), 4),
        "named_refusal_rate": round(len(caught) / max(len(unanswerable), 1), 4),
        "off_topic": len(off_topic),
        "off_topic_refused_by_name": round(sum(off_topic) / len(off_topic), 4) if off_topic else None,
        "false_refusals": false_refusals,
    }, indent=1))


if __name__ == "__main__":
    main()
