"""`targets.models.choose_model`: the model a run sends, checked against the listing
(pure: the listing is handed in)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.core.errors import ConfigurationError
from benchwarden.targets.models import choose_model, listing_failed

URL = "http://127.0.0.1:8080"
names = st.text(alphabet="abcdefgh-0123456789", min_size=1, max_size=12)


@given(listed=st.lists(names, min_size=1, max_size=8, unique=True), data=st.data())
def test_a_listed_model_is_sent_and_none_means_the_first_listed(listed, data):
    requested = data.draw(st.sampled_from(listed))
    assert choose_model(listed, requested, any_model=False, url=URL) == requested
    assert choose_model(listed, None, any_model=False, url=URL) == listed[0]


@given(listed=st.lists(names, max_size=8, unique=True), requested=names)
def test_an_unlisted_model_is_refused_unless_any_model(listed, requested):
    if requested in listed:
        return
    with pytest.raises(ConfigurationError) as refused:
        choose_model(listed, requested, any_model=False, url=URL)
    message = str(refused.value)
    assert "--any-model" in message and requested in message and "\n" not in message
    assert choose_model(listed, requested, any_model=True, url=URL) == requested


def test_the_refusal_names_a_few_listed_models_and_counts_the_rest():
    listed = [f"model-{n}" for n in range(12)]
    with pytest.raises(ConfigurationError, match=r"model-0, .*model-4 and 7 more"):
        choose_model(listed, "modle-1", any_model=False, url=URL)


def test_an_empty_listing_says_so():
    with pytest.raises(ConfigurationError, match="lists no models.*--model"):
        choose_model([], None, any_model=False, url=URL)
    with pytest.raises(ConfigurationError, match="cannot be checked.*--any-model"):
        choose_model([], "mine", any_model=False, url=URL)


def test_any_model_without_a_model_is_refused():
    with pytest.raises(ConfigurationError, match="give --model"):
        choose_model(["a"], None, any_model=True, url=URL)


def test_a_failed_listing_suggests_any_model():
    error = listing_failed(URL, "HTTP 500\nfrom GET /v1/models")
    assert isinstance(error, ConfigurationError)
    assert "--any-model" in str(error) and "\n" not in str(error)
