"""The hash link every tamper-evident log uses: pinned, because changing it would make
every recorded store and ledger fail verification."""

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from benchwarden.core.chain import GENESIS_HASH, link_hash


def test_the_link_is_pinned():
    assert link_hash(GENESIS_HASH, b'["record"]', b"{}") == (
        "9615409715b691be9ec75a3fa4753dfcd1f8c30dd37c93079ba742707337a7b3")


@given(st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
       st.lists(st.binary(max_size=64), max_size=4))
def test_the_link_is_sha256_of_previous_then_nul_separated_parts(previous, parts):
    expected = hashlib.sha256(previous.encode() + b"".join(b"\x00" + p for p in parts))
    assert link_hash(previous, *parts) == expected.hexdigest()
