"""Worked example of a retrieval strategy (docs/retrieval.md walks through it).

Three ideas, none tied to one question:
- entity filter: a line must name every person the question names;
- rare-term hop: lines sharing a rare word (one the question does not use) with a
  kept line come along, which answers multi-hop questions;
- supersede by subject: when several lines state "<subject> is <value>", only the
  latest is current; unless the question asks about the past, older ones stay out;
- rarest words first: kept lines are ordered by the question words they share, each
  weighted by how rare it is in the corpus, so the limit cuts the least telling lines.
"""

import re

from benchwarden.suites.retrieval.api import Item

WORD = re.compile(r"[A-Za-z0-9]+(?:-[0-9]+)?")
CAPITALISED = re.compile(r"\b[A-Z][a-z]+\b")
STATEMENT = re.compile(r"^(?:Update: )?(?P<subject>.+?) is (?:now )?\S+\.$")
PAST = {"was", "before", "first", "originally", "earlier"}
NOT_NAMES = {"What", "Which", "Who", "When", "Where", "How", "Could"}


class EntityFirst:
    def index(self, sessions):
        self.lines = []  # (session, start, end, text): the span each item will cite
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
        self.counts = counts
        self.rare = {word for word, count in counts.items() if count <= 2 and len(word) >= 5}
        self.names = {name for *_, text in self.lines for name in CAPITALISED.findall(text)}
        latest = {}  # subject -> position of its last statement (sessions are in time order)
        for position, (*_, text) in enumerate(self.lines):
            match = STATEMENT.match(text)
            if match:
                latest[match["subject"].lower()] = position
        self.superseded = {
            position for position, (*_, text) in enumerate(self.lines)
            if (match := STATEMENT.match(text)) and latest[match["subject"].lower()] != position}

    def pack(self, question, limit, budget_chars):
        asked = set(WORD.findall(question.lower()))
        people = [name for name in CAPITALISED.findall(question)
                  if name in self.names and name not in NOT_NAMES]
        kept = [position for position, (*_, text) in enumerate(self.lines)
                if people and all(re.search(rf"\b{name}\b", text) for name in people)]
        kept.sort(key=lambda position: -sum(
            1 / self.counts[word]
            for word in asked & set(WORD.findall(self.lines[position][3].lower()))))
        hops = {word for position in kept for word in WORD.findall(self.lines[position][3].lower())
                if word in self.rare and word not in asked}
        for position, (*_, text) in enumerate(self.lines):
            if position not in kept and hops & set(WORD.findall(text.lower())):
                kept.append(position)
        items, used = [], 0
        for position in kept:
            session, start, end, text = self.lines[position]
            old = position in self.superseded
            if old and not PAST & asked:
                continue
            if len(items) == limit or used + len(text) > budget_chars:
                break
            items.append(Item(text, (session, start, end), "superseded" if old else "current"))
            used += len(text)
        return items
