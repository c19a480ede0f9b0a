"""A coding agent over ACP in a real JupyterLab 4 (issue 25): the scripted ACP agent
(tests/support/acp_agent.py, a subprocess the server starts) shows its plan, thoughts and tool
calls as quiet folded lines under its reply, and asks to run a command: the approval shows the
kind, the title and the command in full, and Allow lets it through. In Settings its card says
what it runs and that it started, and a new one is added by typing its command. No console
errors.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, expect

from ..support import acp_agent
from ..support.browser import screenshot_path
from ..support.lab import Console, Lab, lab_folder, notebook, open_notebook, run_all, running_lab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

AGENT = str(Path(acp_agent.__file__).resolve())


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    notebooks = {
        "acp.ipynb": notebook("%load_ext conch_jupyter", "%conch"),
        "acp-settings.ipynb": notebook("%load_ext conch_jupyter", "%conch agents"),
    }
    root = lab_folder(tmp_path_factory, "lab-acp", notebooks)
    with running_lab(root) as running:
        with running.client() as http:
            body = {
                "name": "Coder",
                "provider": {"kind": "acp", "command": sys.executable, "args": [AGENT]},
            }
            answer = http.post(f"{running.url}conch/api/agents", json=body)
            assert answer.status_code == 201, answer.text
        yield running


def send(chat: Locator, text: str) -> None:
    box = chat.locator(".conch-input")
    box.fill(text)
    box.press("Enter")


def test_a_coding_agents_lines_and_its_approval(browser: Browser, lab: Lab) -> None:
    page = open_notebook(browser, f"{lab.url}lab/tree/acp.ipynb?token={lab.token}")
    console = Console(page)
    run_all(page)
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)

    # Its plan, thought and read are quiet lines, folded, under its reply.
    send(chat, "@Coder acp:think")
    lines = chat.locator(".conch-tool[data-tool='acp']")
    expect(lines).to_have_count(3, timeout=60_000)
    expect(lines.nth(0).locator("summary")).to_have_text("Coder · Read data.csv · ran")
    expect(lines.nth(1).locator("summary")).to_have_text("Coder · Plan · ran")
    expect(lines.nth(2).locator("summary")).to_have_text("Coder · Thought · ran")
    reply = lines.nth(0).locator("xpath=preceding-sibling::li[1]")
    expect(reply.locator(".conch-md")).to_have_text("Read it.")
    # Opened, the read shows what came back once, drawn: a code block, no fence marks.
    lines.nth(0).locator("summary").click()
    output = lines.nth(0).locator(".conch-tool-output")
    expect(output.locator("pre code")).to_have_text("3 rows")
    expect(output).not_to_contain_text("```")
    assert output.inner_text().count("3 rows") == 1
    lines.nth(0).locator("summary").click()
    expect(lines.nth(2).locator("details")).not_to_have_attribute("open", "")
    lines.nth(2).locator("summary").click()
    expect(lines.nth(2).locator(".conch-tool-output")).to_have_text("Hmm, A.")

    # It asks to run a command: the approval says what, in full; Allow lets it through.
    send(chat, "@Coder acp:execute")
    approval = chat.locator(".conch-approval.is-acp")
    expect(approval).to_have_count(1, timeout=60_000)
    expect(approval.locator(".conch-approval-head")).to_have_text(
        "Coder wants to run a command: Run make"
    )
    expect(approval.locator("pre.conch-code")).to_have_text("$ rm -rf build && make")
    chat.screenshot(path=screenshot_path("acp-approval"))
    approval.get_by_role("button", name="Allow", exact=True).click()
    expect(approval).to_have_count(0, timeout=10_000)
    expect(lines).to_have_count(4, timeout=30_000)
    expect(lines.nth(3).locator("summary")).to_have_text("Coder · Run make · ran")
    expect(chat.locator(".conch-msg.conch-agent .conch-md").last).to_have_text("execute: yes")
    chat.screenshot(path=screenshot_path("acp-lines"))
    assert console.errors == []
    page.context.close()


def test_settings_add_a_coding_agent_and_its_card_says_whether_it_started(
    browser: Browser, lab: Lab
) -> None:
    # Its card says it started once it took a turn (here, whatever else ran first).
    with lab.client() as http:
        api = f"{lab.url}conch/api/conversations"
        chat = http.post(api, json={"title": "start it"}).json()["id"]
        http.post(f"{api}/{chat}/messages", json={"text": "@Coder acp:say started"})
        deadline = time.monotonic() + 60
        while http.get(f"{api}/{chat}").json()["busy"] and time.monotonic() < deadline:
            time.sleep(0.1)
    address = f"{lab.url}lab/workspaces/acp-settings/tree/acp-settings.ipynb?token={lab.token}"
    page = open_notebook(browser, address)
    console = Console(page)
    run_all(page)
    settings = page.locator(".conch-settings").first
    expect(settings).to_be_visible(timeout=60_000)
    rows = settings.locator(".conch-panel:visible .conch-row")
    coder = rows.filter(has_text="Coder")
    expect(coder).to_contain_text(f"coding agent (ACP) · {sys.executable} {AGENT} · started")
    expect(coder).to_contain_text("not metered by Conch")
    settings.get_by_role("button", name="Add an agent").click()
    form = settings.locator(".conch-form:visible")
    form.locator("[name=kind]").select_option("acp")
    expect(form.locator("[name=model]")).to_be_hidden()
    expect(form.locator("[name=api_key]")).to_be_hidden()
    expect(form.locator("[name=acp_found] option").first).to_have_text(
        "None found on PATH: type a command below"
    )
    form.locator("[name=name]").fill("Goose")
    form.locator("[name=command]").fill("goose-not-installed")
    form.locator("[name=args]").fill("acp")
    form.locator("[name=env]").fill("GOOSE_PROVIDER=ollama")
    form.get_by_role("button", name="Save").click()
    goose = rows.filter(has_text="Goose")
    expect(goose).to_contain_text(
        "coding agent (ACP) · goose-not-installed acp · not started yet · env: GOOSE_PROVIDER",
        timeout=10_000,
    )
    settings.screenshot(path=screenshot_path("acp-settings"))
    with lab.client() as http:
        agent = http.get(f"{lab.url}conch/api/agents/goose").json()
    assert agent["provider"]["env_names"] == ["GOOSE_PROVIDER"]
    assert "ollama" not in str(agent)
    assert console.errors == []
    page.context.close()
