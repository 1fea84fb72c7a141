"""Which model a run asks for: the one named with `--model`, checked against what the
server lists at GET /v1/models, or the first one listed when none is named.

A mistyped `--model` used to be sent as is: some servers answer any model name with
their default model, so a run measured something else than its record says. A model
the server does not list is refused before anything is written, unless the user says
`--any-model` (a router that serves more than it lists, a server whose listing is off).

Invariant: pure; the listing is read by the caller (the I/O shell), so every branch is
tested in memory. Every refusal is one line naming the way out.
"""

from __future__ import annotations

from collections.abc import Sequence

from benchwarden.core.errors import ConfigurationError
from benchwarden.core.formatting import names

SHOWN_MODELS = 5  # a router may list hundreds: name a few, and how many more


def _listed(models: Sequence[str]) -> str:
    return names(models, SHOWN_MODELS)


def choose_model(listed: Sequence[str], requested: str | None, *, any_model: bool,
                 url: str) -> str:
    """The model to send: `requested` when the server lists it (or `any_model`), the
    first listed when none is requested; otherwise a `ConfigurationError`."""
    if requested is None:
        if any_model:
            raise ConfigurationError("--any-model sends the model --model names: give --model")
        if not listed:
            raise ConfigurationError(f"{url} lists no models at GET /v1/models; name one with "
                                     "--model (and add --any-model to send it unchecked)")
        return listed[0]
    if any_model or requested in listed:
        return requested
    if not listed:
        raise ConfigurationError(f"{url} lists no models at GET /v1/models, so --model "
                                 f"{requested} cannot be checked; add --any-model to send it "
                                 "anyway")
    raise ConfigurationError(f"--model {requested} is not a model {url} lists "
                             f"({_listed(listed)}); check the name, or add --any-model to "
                             "send it anyway")


def listing_failed(url: str, problem: str) -> ConfigurationError:
    """The error when GET /v1/models fails and a model must be checked or chosen."""
    return ConfigurationError(f"cannot list the models at {url} (GET /v1/models: "
                              f"{' '.join(problem.split())}); give --model NAME with "
                              "--any-model to send it unchecked")


__all__ = ["choose_model", "listing_failed"]
