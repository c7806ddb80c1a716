"""Which webhook addresses are refused (cannaspider/webhooks/posting.py): any address outside the public
internet, as an IP in the URL or as what a name resolves to."""

from __future__ import annotations

import asyncio

import pytest

from cannaspider.webhooks import posting


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.8.9.10",
        "::1",
        "::ffff:127.0.0.1",  # loopback in an IPv6 mapping
        "0.0.0.0",  # connects to this host
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",  # a cloud's metadata service
        "fe80::1",
        "fd00::1",
        "100.64.0.1",  # shared (carrier-grade NAT)
    ],
)
def test_an_address_outside_the_public_internet_is_refused(address):
    why = posting.refusal(address)
    assert why is not None and "is not public" in why and "WEBHOOK_ALLOW_PRIVATE" in why


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "::ffff:8.8.8.8"])
def test_a_public_address_is_taken(address):
    assert posting.refusal(address) is None


def test_an_ip_in_the_url_is_checked_a_name_is_left_to_the_resolver():
    assert posting.literal_refusal("http://[::1]:8000/x") is not None
    assert posting.literal_refusal("http://10.0.0.7/hook") is not None
    assert posting.literal_refusal("https://hooks.example.com/x") is None
    assert posting.literal_refusal("https://8.8.8.8/x") is None


def test_the_resolver_refuses_a_name_with_a_private_address():
    async def resolve() -> None:
        resolver = posting.CheckedResolver()
        try:
            await resolver.resolve("localhost", 80)
        finally:
            await resolver.close()

    with pytest.raises(posting.WebhookRefused, match=r"127\.0\.0\.1 is not public"):
        asyncio.run(resolve())
