"""The probes of one contamination run: prompts, canaries and topics, drawn from the seed.

A probe is a prompt that carries its own canary (a reference code such as
`XK-AZURE-HERON-41`) and asks the model to echo it at the start and the end of a short
answer about the probe's topic. A canary found in some other probe's reply is leakage on
its own evidence, so the canaries must never be confusable.

Invariants (tested over many seeds):
- Everything is a pure function of (seed, count, scenario): `random.Random(seed)` only.
- Canaries share no `-`-separated component pairwise, none is a substring of another,
  and none occurs in any other probe's prompt.
- Topics differ between probes, so even a mangled leak shows as a divergence.
- Scenario `distinct-prefix` gives every probe its own preamble whose very first words
  differ (no two prompts share a prefix-cache block); the other scenarios share one
  preamble, so prompts are identical up to the canary.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SCENARIOS = ("shared-prefix", "distinct-prefix", "cancel")

_LETTERS = "BCDFGHJKLMNPQRSTVWXZ"  # no vowels: a two-letter prefix never spells a word

_ADJECTIVES = (
    "AZURE", "CRIMSON", "AMBER", "COBALT", "SCARLET", "IVORY", "OCHRE", "JADE", "SILVER",
    "TAWNY", "VIOLET", "RUSSET", "SAFFRON", "INDIGO", "MAROON", "COPPER", "UMBER", "TEAL",
    "MAUVE", "SABLE", "CERULEAN", "VERMILION", "GILDED", "DUSKY", "FROSTED", "MOSSY",
    "SOLAR", "LUNAR", "BOREAL", "HOLLOW", "QUIET", "BRISK", "STEADY", "NIMBLE", "PLUCKY",
    "RUGGED", "SUNLIT", "WINTRY", "VELVET", "GRANITE",
)

_NOUNS = (
    "HERON", "OTTER", "FALCON", "BADGER", "MARTEN", "PLOVER", "LYNX", "IBEX", "WALRUS",
    "PELICAN", "BISON", "CONDOR", "GECKO", "JACKAL", "KESTREL", "LEMUR", "MAGPIE",
    "NARWHAL", "OCELOT", "PUFFIN", "QUOKKA", "RAVEN", "SALMON", "TAPIR", "URCHIN", "VIPER",
    "WOMBAT", "YAK", "ZEBRA", "BEAVER", "CRANE", "DINGO", "EGRET", "FERRET", "GIBBON",
    "HORNET", "IGUANA", "KOALA", "LOBSTER", "MOOSE",
)

TOPICS = (
    "a lighthouse warns ships at night",
    "a water mill grinds grain into flour",
    "bees make honey from nectar",
    "a sundial tells the time from a shadow",
    "a bakery opens before sunrise",
    "glaciers carve valleys over centuries",
    "a compass needle points north",
    "a blacksmith shapes hot iron",
    "tides follow the pull of the moon",
    "a library lends books to readers",
    "a potter throws a bowl on a wheel",
    "a kite rises on a steady wind",
    "a farmer rotates crops across fields",
    "a cartographer draws a coastline",
    "a violin is tuned before a concert",
    "a beaver builds a dam across a stream",
    "a weaver makes cloth on a loom",
    "snow insulates the ground in winter",
    "a canal lock lifts a boat",
    "a telescope gathers faint starlight",
    "a chess player plans several moves ahead",
    "a gardener prunes an apple tree",
    "a volcano forms new islands",
    "a postal worker sorts letters",
    "a bridge spreads its load across arches",
    "a candle maker dips wicks in wax",
    "a river delta spreads silt into the sea",
    "a clockmaker repairs a pendulum clock",
    "a shepherd guides a flock down a hill",
    "a windmill pumps water from a marsh",
    "a glassblower shapes molten glass",
    "a fisher mends a net on the shore",
)

MAX_PROBES = len(TOPICS)

_PREAMBLE = (
    "You are taking part in a determinism audit of a language model service. Several "
    "requests are answered at the same time, and every answer is compared word for word "
    "with the answer the same request gets when it runs alone. Follow the instructions "
    "below exactly, add nothing before or after them, and do not explain what you are "
    "doing."
)

# Opening words for distinct-prefix preambles: the prompts must differ from the very
# first token, or a prefix cache could still share a block between them.
_OPENINGS = (
    "Morning", "Harbour", "Granite", "Lantern", "Orchard", "Meadow", "Copper", "Thistle",
    "Canyon", "Juniper", "Pebble", "Summit", "Willow", "Ember", "Falcon", "Glacier",
    "Hazel", "Island", "Kettle", "Lagoon", "Maple", "Nutmeg", "Oasis", "Prairie",
    "Quarry", "Ridge", "Saddle", "Timber", "Upland", "Valley", "Walnut", "Zephyr",
)


@dataclass(frozen=True)
class Probe:
    index: int
    canary: str
    topic: str
    prompt: str


def draw_canaries(rng: random.Random, count: int) -> list[str]:
    """`count` canaries such that no two share any component (so no substring either)."""
    if count > min(len(_ADJECTIVES), len(_NOUNS)):
        raise ValueError(f"at most {min(len(_ADJECTIVES), len(_NOUNS))} canaries per run")
    prefixes: list[str] = []
    while len(prefixes) < count:
        prefix = rng.choice(_LETTERS) + rng.choice(_LETTERS)
        if prefix not in prefixes:
            prefixes.append(prefix)
    adjectives = rng.sample(_ADJECTIVES, count)
    nouns = rng.sample(_NOUNS, count)
    numbers = rng.sample(range(10, 100), count)
    return [f"{p}-{a}-{n}-{d}" for p, a, n, d in zip(prefixes, adjectives, nouns, numbers,
                                                            strict=True)]


def _prompt(preamble: str, canary: str, topic: str) -> str:
    # Short labelled lines: small models (SmolLM2-135M) follow them, and asking for an
    # explanation "to a child" keeps replies above the completion-token floor.
    return (
        f"{preamble}\n\n"
        f"Reference code: {canary}\n"
        f"Topic: {topic}\n\n"
        "First line: the reference code. Then write a paragraph of five sentences that "
        "explains the topic to a child. Last line: the reference code."
    )


def make_probes(seed: int, count: int, scenario: str = "shared-prefix") -> tuple[Probe, ...]:
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")
    if not 2 <= count <= MAX_PROBES:
        raise ValueError(f"--probes must be between 2 and {MAX_PROBES}, not {count}")
    rng = random.Random(seed)
    canaries = draw_canaries(rng, count)
    topics = rng.sample(TOPICS, count)
    if scenario == "distinct-prefix":
        openings = rng.sample(_OPENINGS, count)
        preambles = [f"{word} session, audit {i + 1}. {_PREAMBLE}"
                     for i, word in enumerate(openings)]
    else:
        preambles = [_PREAMBLE] * count
    probes = tuple(Probe(i, canaries[i], topics[i], _prompt(preambles[i], canaries[i], topics[i]))
                   for i in range(count))
    problem = canary_problem(probes)
    if problem:  # cannot happen with the pools above; refuse rather than run a weak test
        raise ValueError(f"seed {seed} drew unusable canaries: {problem}")
    return probes


def canary_problem(probes: tuple[Probe, ...] | list[Probe]) -> str | None:
    """Why these probes' canaries could be confused with each other, or None."""
    for a in probes:
        for b in probes:
            if a.index == b.index:
                continue
            shared = set(a.canary.split("-")) & set(b.canary.split("-"))
            if shared:
                return f"{a.canary} and {b.canary} share {sorted(shared)}"
            if a.canary in b.canary:
                return f"{a.canary} occurs inside {b.canary}"
            if a.canary in b.prompt:
                return f"{a.canary} occurs in the prompt of probe {b.index}"
            if a.topic == b.topic:
                return f"probes {a.index} and {b.index} share the topic {a.topic!r}"
    return None
