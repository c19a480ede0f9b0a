"""The administrator's policy, as a pure core: reading c.ConchApp.policy (bad keys and values
refused in words naming them) and one decision per key, each refusal 403 `policy` in words that
end "set by your administrator"."""

from __future__ import annotations

from typing import Any

import pytest

from conch_jupyter.core.policy import (
    NO_POLICY,
    BadPolicy,
    Policy,
    PolicyRefused,
    cap_chat_limit,
    cap_monthly_budget,
    check_acp_command,
    check_chat_limit,
    check_door,
    check_door_remote,
    check_mode,
    check_monthly_budget,
    check_outside_host,
    check_provider,
    effective_mode,
    mode_words,
    parse_policy,
)

CLASS = {
    "modes": ["ask", "read"],
    "max_chat_usd": 2,
    "max_monthly_usd": 20.0,
    "door": False,
    "outside_hosts": False,
    "providers": {"kinds": ["openai"], "base_urls": ["https://gateway.school.example/v1/"]},
    "acp": False,
}


def refused(call: Any, *args: Any) -> str:
    with pytest.raises(PolicyRefused) as caught:
        call(*args)
    error = caught.value
    assert (error.code, error.status) == ("policy", 403)
    assert error.message.endswith("set by your administrator.")
    return error.message


def test_no_policy_locks_nothing() -> None:
    assert parse_policy(None) == NO_POLICY == parse_policy({})
    assert NO_POLICY.locked == {}
    check_mode(NO_POLICY, "auto")
    check_door(NO_POLICY)
    check_door_remote(NO_POLICY, True)
    check_outside_host(NO_POLICY, "anywhere.example")
    check_provider(NO_POLICY, "anthropic", "https://api.anthropic.com")
    check_acp_command(NO_POLICY, "claude-code-acp")
    check_chat_limit(NO_POLICY, None)
    assert cap_chat_limit(NO_POLICY, None) is None
    assert cap_monthly_budget(NO_POLICY, 50.0) == 50.0


def test_a_class_policy_reads_and_says_what_it_locks() -> None:
    policy = parse_policy(CLASS)
    assert policy.locked == {
        "modes": ["ask", "read"],
        "max_chat_usd": 2.0,
        "max_monthly_usd": 20.0,
        "door": False,
        "outside_hosts": False,
        "providers": {"kinds": ["openai"], "base_urls": ["https://gateway.school.example/v1"]},
        "acp": False,
    }
    # What it says is what it reads back as.
    assert parse_policy(policy.locked) == policy


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ([], "must be a dict"),
        ({"mode": ["ask"]}, "unknown key 'mode'; the keys are modes, max_chat_usd"),
        ({"modes": "ask"}, "modes must be a list of modes"),
        ({"modes": []}, "at least one mode"),
        ({"modes": ["ask", "yolo"]}, "'yolo' is no mode"),
        ({"max_chat_usd": "5"}, "max_chat_usd must be a number of US dollars, not a str"),
        ({"max_chat_usd": True}, "max_chat_usd must be a number of US dollars, not true"),
        ({"max_monthly_usd": -1}, "max_monthly_usd must be zero or more"),
        ({"max_monthly_usd": float("nan")}, "max_monthly_usd must be a number"),
        ({"door": "no"}, "door must be false"),
        ({"door_remote": 0}, "door_remote must be false"),
        ({"outside_hosts": True}, "outside_hosts must be false or a list"),
        ({"outside_hosts": ["a.example:443"]}, "'a.example:443' is not a host name"),
        ({"outside_hosts": ["https://a.example"]}, "is not a host name"),
        ({"outside_hosts": ["*.example.org"]}, "without scheme, port, path or wildcard"),
        ({"providers": ["openai"]}, 'providers must be a dict with "kinds"'),
        ({"providers": {}}, 'providers must say "kinds", "base_urls" or both'),
        ({"providers": {"kind": ["openai"]}}, "providers: unknown key 'kind'"),
        ({"providers": {"kinds": ["gpt"]}}, "'gpt' is no provider kind"),
        ({"providers": {"base_urls": ["gateway/v1"]}}, "'gateway/v1' is not an address"),
        ({"acp": True}, "acp must be false or a list"),
        ({"acp": [""]}, "acp must be a list of commands"),
    ],
)
def test_a_bad_policy_is_refused_in_words_naming_the_key(raw: Any, words: str) -> None:
    with pytest.raises(BadPolicy) as caught:
        parse_policy(raw)
    assert caught.value.message.startswith("c.ConchApp.policy: ")
    assert words in caught.value.message


def test_modes_refuse_the_others_and_a_kept_mode_runs_in_the_most_careful_allowed() -> None:
    policy = Policy(modes=("ask", "read"))
    check_mode(policy, "ask")
    assert refused(check_mode, policy, "auto") == (
        "Auto is off on this server (the modes allowed: Ask, Read): set by your administrator."
    )
    assert effective_mode(policy, "auto") == "read"
    assert effective_mode(Policy(modes=("ask", "auto")), "read") == "ask"
    assert effective_mode(policy, "ask") == "ask"
    assert mode_words(policy, "ask") is None
    assert mode_words(policy, "auto") == (
        "Auto is off on this server, so this chat runs in Read: set by your administrator."
    )


def test_limits_are_capped_and_a_higher_one_is_refused() -> None:
    policy = Policy(max_chat_usd=2.0, max_monthly_usd=20.0)
    assert cap_chat_limit(policy, 5.0) == 2.0
    assert cap_chat_limit(policy, 1.0) == 1.0
    assert cap_chat_limit(policy, None) == 2.0  # "no limit" is above any cap
    assert cap_monthly_budget(policy, 50.0) == 20.0
    assert cap_monthly_budget(policy, None) == 20.0
    check_chat_limit(policy, 2.0)
    check_monthly_budget(policy, 19.5)
    assert "at most $2.00" in refused(check_chat_limit, policy, 2.01)
    assert "at most $2.00" in refused(check_chat_limit, policy, None)
    assert "monthly budget can be at most $20.00" in refused(check_monthly_budget, policy, 21.0)


def test_the_door_and_the_remote_door() -> None:
    assert "The door is closed" in refused(check_door, Policy(door=False))
    check_door(Policy(door_remote=False))
    check_door_remote(Policy(door_remote=False), False)
    assert "other computers" in refused(check_door_remote, Policy(door_remote=False), True)


def test_outside_hosts_by_name_without_port_case_or_trailing_dot() -> None:
    policy = parse_policy({"outside_hosts": ["Agents.Example.org", "10.0.0.7", "[::1]"]})
    assert policy.outside_hosts == ("agents.example.org", "10.0.0.7", "::1")
    check_outside_host(policy, "agents.example.org")
    check_outside_host(policy, "AGENTS.example.org.")
    check_outside_host(policy, "10.0.0.7")
    check_outside_host(policy, "::1")
    words = refused(check_outside_host, policy, "evil.example")
    assert words.startswith("Outside agents at evil.example are not allowed on this server")
    assert "agents.example.org" in words
    # A look-alike suffix is another host.
    refused(check_outside_host, policy, "agents.example.org.evil.example")
    assert refused(check_outside_host, parse_policy({"outside_hosts": False}), "a.example") == (
        "Outside agents are off on this server: set by your administrator."
    )


def test_providers_by_kind_and_base_url_trailing_slash_aside() -> None:
    policy = parse_policy(CLASS)
    check_provider(policy, "openai", "https://gateway.school.example/v1")
    check_provider(policy, "openai", "https://Gateway.School.example/v1/")
    assert "Anthropic models are off" in refused(
        check_provider, policy, "anthropic", "https://gateway.school.example/v1"
    )
    assert "The model address https://api.openai.com/v1 is not allowed" in refused(
        check_provider, policy, "openai", "https://api.openai.com/v1"
    )
    # Another path on the gateway is another address.
    refused(check_provider, policy, "openai", "https://gateway.school.example/v2")
    refused(check_provider, policy, "offline", None)
    only_urls = parse_policy({"providers": {"base_urls": ["http://127.0.0.1:11434/v1"]}})
    check_provider(only_urls, "offline", None)  # calls no address
    check_provider(only_urls, "openai", "http://127.0.0.1:11434/v1/")


def test_acp_commands() -> None:
    policy = parse_policy({"acp": ["claude-code-acp", "goose"]})
    check_acp_command(policy, "goose")
    check_provider(policy, "acp", None, "claude-code-acp")
    assert "'codex-acp' is not allowed" in refused(check_acp_command, policy, "codex-acp")
    assert "'codex-acp' is not allowed" in refused(check_provider, policy, "acp", None, "codex-acp")
    off = parse_policy({"acp": False})
    assert refused(check_acp_command, off, "goose") == (
        "Coding agents over ACP are off on this server: set by your administrator."
    )
    # The kinds lock covers ACP too.
    assert "Coding agents over ACP are off" in refused(
        check_provider, parse_policy({"providers": {"kinds": ["openai"]}}), "acp", None, "goose"
    )


def test_the_first_agents_start_on_a_provider_the_policy_allows() -> None:
    from conch_jupyter.providers.base import ProviderConfig
    from conch_jupyter.server_ext.app import allowed_default

    found = ProviderConfig("openai", model="gpt-4o-mini")  # OPENAI_API_KEY in the environment
    gateway = parse_policy({"providers": {"base_urls": ["https://llm.school.example/v1"]}})
    assert allowed_default(gateway, found) == ProviderConfig("offline", model="offline")
    assert allowed_default(NO_POLICY, found) == found
    ollama = ProviderConfig("openai", model="llama3", base_url="http://127.0.0.1:11434/v1")
    local = parse_policy({"providers": {"base_urls": ["http://127.0.0.1:11434/v1/"]}})
    assert allowed_default(local, ollama) == ollama
