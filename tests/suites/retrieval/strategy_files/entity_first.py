"""Worked example of a retrieval strategy (docs/retrieval.md walks through it).

Three ideas, none specific to one question:
- entity filter: a line must name every person the question names;
- rare-term hop: lines sharing a rare word (not from the question) with a kept line
  come along, which answers multi-hop questions;
- supersede by subject: when several lines state "<subject> is <value>", only the latest
  is current. Unless the question asks about the past, older ones are left out.
"""

import re

from benchwarden.suites.retrieval.api import Item

WORD = re.compile(r"[A-Za-z0-9]+(?:-[0-9]+)?")
NAME = re.compile(r"\b([A-Z][a-z]+)(?='s\b|\b)")
STATEMENT = re.compile(r"^(?:Update: )?(?P<subject>.+?) is (?:now )?(?P<value>\S+)\.$")
PAST = {"was", "before", "first", "originally", "earlier"}
QUESTION_WORDS = {"what", "which", "who", "when", "where", "how", "could", "quick"}


class EntityFirst:
    def index(self, sessions):
        self.lines = []  # (session, start, end, text)
        for session in sessions:
            start = 0
            for text in session.text.split("\n"):
                if text.strip():
                    self.lines.append((session.index, start, start + len(text), text))
                start += len(text) + 1
        counts = {}
        for *_, text in self.lines:
            for word in set(WORD.findall(text.lower())):
                counts[word] = counts.get(word, 0) + 1
        self.rare = {word for word, count in counts.items() if count <= 2 and len(word) >= 5}
        self.names = {m for *_, text in self.lines for m in NAME.findall(text)}
        # the latest statement about each subject is current; earlier ones are superseded
        latest = {}
        for position, (*_, text) in enumerate(self.lines):
            match = STATEMENT.match(text)
            if match:
                latest[match["subject"].lower()] = position
        self.superseded = set()
        for position, (*_, text) in enumerate(self.lines):
            match = STATEMENT.match(text)
            if match and latest[match["subject"].lower()] != position:
                self.superseded.add(position)

    def pack(self, question, limit, budget_chars):
        people = [n for n in NAME.findall(question) if n in self.names
                  and n.lower() not in QUESTION_WORDS]
        asks_past = bool(PAST & set(WORD.findall(question.lower())))
        kept = [p for p, (*_, text) in enumerate(self.lines)
                if people and all(re.search(rf"\b{n}\b", text) for n in people)]
        asked = set(WORD.findall(question.lower()))
        hops = {w for p in kept for w in WORD.findall(self.lines[p][3].lower())
                if w in self.rare and w not in asked}
        for position, (*_, text) in enumerate(self.lines):
            if position not in kept and hops & set(WORD.findall(text.lower())):
                kept.append(position)
        items, used = [], 0
        for position in kept:
            session, start, end, text = self.lines[position]
            old = position in self.superseded
            if old and not asks_past:
                continue
            if len(items) == limit or used + len(text) > budget_chars:
                break
            items.append(Item(text, (session, start, end), "superseded" if old else "current"))
            used += len(text)
        return items
