"""Engine presets: the explicit sampling fields that make `temperature: 0` mean greedy.

Servers apply their own defaults (a GGUF's repeat penalty, a model's
generation_config.json), so the same request body can sample differently per engine.
Each preset adds the fields that switch those defaults off on one engine, and leaves out
the ones that engine mishandles (TGI turns `presence_penalty` into a repetition penalty
and rejects `top_p: 1`; Ollama's /v1 cannot set a repeat penalty at all). The report
records the exact body sent, so a preset is never a hidden setting.

Invariant: `request_body` is a pure function of its arguments, and the fields a run
depends on (`messages`, `stream`) cannot be overridden by a preset or by `--extra-body`;
nor can `--extra-body` carry a credential (it is stored with the run, for ever).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchwarden.core.errors import ConfigurationError
from benchwarden.core.secrets import credential_paths

PRESETS: dict[str, dict[str, Any]] = {
    "none": {},
    "llamacpp": {"top_k": 0, "top_p": 1.0, "min_p": 0.0, "repeat_penalty": 1.0,
                 "presence_penalty": 0.0, "frequency_penalty": 0.0},
    "vllm": {"top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0,
             "presence_penalty": 0.0, "frequency_penalty": 0.0},
    "sglang": {"top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0,
               "presence_penalty": 0.0, "frequency_penalty": 0.0},
    "tgi": {"frequency_penalty": 0.0},
    "ollama": {"top_p": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0},
    "openai": {"top_p": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0},
}

PROTECTED_FIELDS = ("messages", "stream")

# How many top candidates per token a run asks for by default (`--logprobs N`; 0: none).
# On for the engines whose chat completions take `logprobs`/`top_logprobs` (llama.cpp's
# server, vLLM, SGLang, OpenAI); off for `none` (an unknown server may refuse unknown
# fields) and for TGI and Ollama, whose support varies by version. An engine that
# refuses the fields anyway costs the run nothing: the driver checks first and drops them.
DEFAULT_TOP_LOGPROBS: dict[str, int] = {"llamacpp": 5, "vllm": 5, "sglang": 5, "openai": 5}
MAX_TOP_LOGPROBS = 20  # OpenAI's limit; llama.cpp and vLLM accept at least as many


def default_top_logprobs(preset: str) -> int:
    """The `--logprobs` a preset implies when none is given."""
    return DEFAULT_TOP_LOGPROBS.get(preset, 0)


def preset_fields(name: str) -> dict[str, Any]:
    try:
        return dict(PRESETS[name])
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}") from None


def check_extra_body(extra: Mapping[str, Any]) -> None:
    """Refuse extras that would break the run or put a credential into the store.

    Credentials are found by the one documented rule (`core.secrets.credential_paths`):
    a field name containing token, key, secret, auth, cookie, session, ... at any depth
    (sampling fields such as `max_tokens` and `top_k` excepted), or a value shaped like
    a key (`sk-...`, `Bearer ...`, a JWT). Keys go in `--api-key-env`, never the body.
    """
    if not isinstance(extra, Mapping):
        raise ConfigurationError("--extra-body must be a JSON object, e.g. '{\"seed\": 7}'")
    clash = [name for name in PROTECTED_FIELDS if name in extra]
    if clash:
        raise ConfigurationError(
            f"--extra-body may not set {', '.join(clash)}: the suite builds them")
    credentials = credential_paths(extra)
    if credentials:
        raise ConfigurationError(
            f"--extra-body field {', '.join(credentials)} looks like a credential and would "
            "be stored for ever; pass keys with --api-key-env (see docs/secrets.md for the rule)")


def request_body(*, model: str, prompt: str, max_tokens: int, preset: str,
                 extra: Mapping[str, Any], top_logprobs: int = 0) -> dict[str, Any]:
    """The exact body POSTed for one probe: base fields, then preset, then logprobs
    (`logprobs: true, top_logprobs: N` when N > 0), then extras."""
    check_extra_body(extra)
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "stream": True,
        "temperature": 0,
        "max_tokens": max_tokens,
        "stream_options": {"include_usage": True},
    }
    body.update(preset_fields(preset))
    if top_logprobs > 0:
        body.update(logprobs=True, top_logprobs=top_logprobs)
    body.update(extra)
    return body
