"""Grammar of generated messages: the indefinite article fits the word after it, and a
count agrees with its noun (``1 level``, ``2 levels``; never ``1 agents`` or ``(s)``).

Two kinds of checks: every row of the message tables that picks a word at run time is
rendered (the web destination policy's refusal categories, in every embedding; the caps
of subagents, workflows and goals at 1 and at 2), and a scan of the message-writing
sources for the two mistakes that produced them (``a {word}`` and ``(s)``)."""

from __future__ import annotations

import ipaddress
import re
import tokenize
from pathlib import Path

import httpx
import pytest

from codemode.agent import Agent
from codemode.agent._words import count_of
from codemode.tools._text import article
from codemode.tools.web import _policy

ROOT = Path(__file__).resolve().parents[2]


def _expected_article(word: str) -> str:
    # The refusal categories are words, not numbers: a vowel letter is a vowel sound.
    return "an" if word[0].lower() in "aeiou" else "a"


def _categories() -> list[tuple[str, str]]:
    """One address per refusal category, plain and in every IPv6 embedding of IPv4."""
    out: list[tuple[str, str]] = []
    for net, _why in (*_policy._V4_REFUSED, *_policy._V6_REFUSED):
        network = ipaddress.ip_network(net)
        ip = network.network_address + (1 if network.num_addresses > 1 else 0)
        out.append((str(ip), net))
        if isinstance(ip, ipaddress.IPv4Address):
            packed = int(ip)
            out.append((str(ipaddress.IPv6Address((0xFFFF << 32) | packed)), f"mapped {net}"))
            out.append(
                (str(ipaddress.IPv6Address((0x2002 << 112) | (packed << 80))), f"6to4 {net}")
            )
            nat64 = int(ipaddress.IPv6Address("64:ff9b::"))
            out.append((str(ipaddress.IPv6Address(nat64 | packed)), f"NAT64 {net}"))
    return out


@pytest.mark.parametrize(("address", "label"), _categories())
def test_every_destination_refusal_has_the_right_article(address: str, label: str) -> None:
    ip = ipaddress.ip_address(address)
    why = _policy.address_refusal(ip)
    if why is None:  # an embedding of an address that is public once unwrapped
        return
    url = httpx.URL(f"http://[{ip}]/" if ip.version == 6 else f"http://{ip}/")
    for literal in (True, False):
        message = _policy._refused(url, "example.test", ip, why, literal).message
        assert f" {_expected_article(why)} {why} address," in message, message


def test_the_article_helper_reads_numbers_aloud() -> None:
    assert article("IPv4-mapped loopback") == "an IPv4-mapped loopback"
    assert article("unspecified") == "an unspecified"
    assert article("6to4 private") == "a 6to4 private"
    assert [article(f"{n}-byte").split()[0] for n in (1, 8, 11, 18, 80, 100, 800, 8_000)] == [
        "a",
        "an",
        "an",
        "an",
        "an",
        "a",
        "an",
        "an",
    ]
    assert (count_of(1, "agent"), count_of(2, "agent"), count_of(0, "agent")) == (
        "1 agent",
        "2 agents",
        "0 agents",
    )


def test_caps_agree_with_their_counts(tmp_path: Path) -> None:
    from codemode.agent import ChildHost, ModelClient, ModelConfig
    from codemode.agent._children import ChildLimitError
    from codemode.agent._goal import _all_rounds
    from codemode.engine import MemorySessionLog, ToolRuntime

    runtime = ToolRuntime(mode="native")
    client = ModelClient(ModelConfig("http://127.0.0.1:9/v1", "unused"), api_key="x")
    for cap, level, started in ((1, "1 level", "1 subagent"), (2, "2 levels", "2 subagents")):
        root = Agent(runtime, runtime.scope(f"root{cap}", session=MemorySessionLog()), client)
        host = ChildHost(root, max_depth=cap, max_children=cap)
        node = root
        for _ in range(cap):
            node = host.make_child(node)
        with pytest.raises(ChildLimitError) as deep:
            host.make_child(node)
        assert f"at most {level} deep;" in deep.value.message
        with pytest.raises(ChildLimitError) as many:
            host.make_child(root)
        assert f"already started {started} (the limit)" in many.value.message
    assert _all_rounds(1) == "its only round" and _all_rounds(3) == "all 3 rounds"


# Message sources: what the agent, the CLI and the tools of this area say.
_SOURCES = [
    *sorted((ROOT / "agent").glob("*.py")),
    *sorted((ROOT / "cli").glob("*.py")),
    *sorted((ROOT / "tools" / "web").glob("*.py")),
    *sorted((ROOT / "tools" / "fs").glob("*.py")),
    *sorted((ROOT / "bench").glob("_render.py")),
]
# Literal "(s)" that the reference's own strings carry over, and "http(s)".
_ALLOWED_S = ("http(s)",)
_A_BRACE = re.compile(r"\b[aA] \{")
# "a {x}" where x is always a consonant sound: python/typescript, a schedule field name.
_FIXED_A = ("worker needs", "has a {field}")


def _strings(path: Path) -> list[tuple[int, str]]:
    """The string literals of ``path`` (f-strings whole), with their line numbers;
    docstrings left out (they describe, they are not messages)."""
    out = []
    previous = tokenize.INDENT
    with path.open("rb") as source:
        for token in tokenize.tokenize(source.readline):
            if token.type == tokenize.STRING and previous not in (
                tokenize.ENCODING,
                tokenize.INDENT,
                tokenize.NEWLINE,
                tokenize.NL,
                tokenize.DEDENT,
            ):
                out.append((token.start[0], token.string))
            if token.type not in (tokenize.COMMENT,):
                previous = token.type
    return out


@pytest.mark.parametrize("path", _SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_message_guesses_its_article_or_plural(path: Path) -> None:
    problems = []
    for number, literal in _strings(path):
        if "(s)" in literal and not any(ok in literal for ok in _ALLOWED_S):
            problems.append(f"{number}: (s): {literal}")
        # "a {word}" is right only when the word is fixed to a consonant sound: list those.
        if literal.lstrip("rbRB").startswith(("f", "F")) and _A_BRACE.search(literal):
            if not any(ok in literal for ok in _FIXED_A):
                problems.append(f"{number}: a {{…}}: {literal}")
    assert problems == []
