"""Proxy URLs as operators type them: parsed, refused with a reason, never printed with a password."""

from __future__ import annotations

import pytest

from cannaspider.stealth.proxies import ProxyInputError, ProxyRecord, parse_proxy_url


def test_credentials_are_read_and_percent_encoded_in_the_url():
    spec = parse_proxy_url("http://scout:pa55%40w0rd@10.0.0.1:3128")
    assert (spec.protocol, spec.host, spec.port, spec.username, spec.password) == (
        "http",
        "10.0.0.1",
        3128,
        "scout",
        "pa55@w0rd",
    )
    record = ProxyRecord(7, spec.protocol, spec.host, spec.port, spec.username, spec.password)
    assert record.url == "http://scout:pa55%40w0rd@10.0.0.1:3128"
    assert record.masked == "http://scout:***@10.0.0.1:3128"
    assert "pa55" not in repr(record) and "pa55" not in str(record)


def test_scheme_defaults_to_http():
    assert parse_proxy_url("127.0.0.1:8080").protocol == "http"


@pytest.mark.parametrize("scheme", ["socks5", "socks5h", "https", "SOCKS5H"])
def test_socks5_socks5h_and_https_proxies_are_accepted(scheme):
    """Was: socks5 refused, for Scrapy's handlers; every proxied request is curl_cffi's or Chromium's."""
    spec = parse_proxy_url(f"{scheme}://scout:pa:ss%40w0rd@10.0.0.1:1080")
    assert (spec.protocol, spec.username, spec.password) == (scheme.lower(), "scout", "pa:ss@w0rd")
    record = ProxyRecord(7, spec.protocol, spec.host, spec.port, spec.username, spec.password)
    assert record.url == f"{scheme.lower()}://scout:pa%3Ass%40w0rd@10.0.0.1:1080"
    assert record.masked == f"{scheme.lower()}://scout:***@10.0.0.1:1080"


def test_chromium_cannot_use_a_socks5_proxy_with_a_password():
    assert ProxyRecord(1, "socks5", "h", 1080, "u", "p").browser_refusal == (
        "Chromium does not support socks5 proxies with a password"
    )
    assert ProxyRecord(2, "socks5h", "h", 1080, "u", "p").browser_refusal is not None
    assert ProxyRecord(3, "socks5", "h", 1080).browser_refusal is None
    assert ProxyRecord(4, "http", "h", 3128, "u", "p").browser_refusal is None
    assert ProxyRecord(5, "https", "h", 443, "u", "p").browser_refusal is None


@pytest.mark.parametrize(
    "text, reason",
    [
        ("socks4://u:secret@h:1080", "socks4 proxies are not supported: no password"),
        ("ftp://h:21", "unknown proxy protocol"),
        ("http://h", "no port"),
        ("http://h:99999", "port is not a number"),
        ("http://u:secret@h:80/path", "without a path"),
        ("", "empty proxy"),
    ],
)
def test_bad_proxies_are_refused_with_the_reason_and_no_password(text, reason):
    with pytest.raises(ProxyInputError, match=reason) as err:
        parse_proxy_url(text)
    assert "secret" not in str(err.value)
