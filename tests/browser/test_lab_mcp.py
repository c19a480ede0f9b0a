"""Your MCP servers in a real JupyterLab 4 (issue 39): Settings → Tools adds a server (the
`mcp` SDK's FastMCP demo server, a program over stdio), Test lists its tools with what their
annotations mean, the agent's form gives it to an agent with a checkbox; then in a chat the
agent (a scripted model in OpenAI's wire format) calls the server's destructive tool, and the
approval shows the server, the tool and its arguments in full: Allow lets it run (the server's
own mark on disk says so), and its result is a folded tool line. Remove ends it. No console
errors.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from ..support.browser import screenshot_path
from ..support.lab import Console, Lab, lab_folder, notebook, open_notebook, run_all, running_lab
from ..support.mcp_servers import SCRIPT
from ..support.scripted_models import Reply, ScriptedModels

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedModels]:
    with ScriptedModels() as models:
        yield models


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, scripted: ScriptedModels) -> Iterator[Lab]:
    notebooks = {
        "mcp-settings.ipynb": notebook("%load_ext conch_jupyter", "%conch agents"),
        "mcp-chat.ipynb": notebook("%load_ext conch_jupyter", "%conch"),
    }
    root = lab_folder(tmp_path_factory, "lab-mcp", notebooks)
    with running_lab(root) as running:
        with running.client() as http:
            body = {
                "name": "Keeper",
                "provider": {"kind": "openai", "model": "m", "base_url": scripted.openai_url},
            }
            answer = http.post(f"{running.url}conch/api/agents", json=body)
            assert answer.status_code == 201, answer.text
        yield running


def test_settings_tools_and_an_approval(
    browser: Browser, lab: Lab, scripted: ScriptedModels, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    address = f"{lab.url}lab/workspaces/mcp-settings/tree/mcp-settings.ipynb?token={lab.token}"
    page = open_notebook(browser, address)
    console = Console(page)
    run_all(page)
    settings = page.locator(".conch-settings").first
    expect(settings).to_be_visible(timeout=60_000)
    settings.get_by_role("tab", name="Tools").click()
    panel = settings.locator(".conch-panel:visible")
    form = panel.locator(".conch-mcp-add")
    form.locator("[name=mcp-name]").fill("demo")
    form.locator("[name=mcp-command]").fill(sys.executable)
    form.locator("[name=mcp-args]").fill(f"{SCRIPT}\nstdio\n{marks}")
    form.locator("[name=mcp-values]").fill("DEMO_TOKEN=sealed-in-the-test")
    form.get_by_role("button", name="Add").click()
    row = panel.locator(".conch-mcp-server").filter(has_text="demo")
    expect(row).to_contain_text("not started yet", timeout=10_000)
    expect(row).to_contain_text("Sealed: DEMO_TOKEN")
    expect(settings).not_to_contain_text("sealed-in-the-test")
    row.get_by_role("button", name="Test demo").click()
    tools = row.locator(".conch-mcp-tool")
    expect(tools.filter(has_text="lookup")).to_contain_text("reads", timeout=60_000)
    expect(tools.filter(has_text="fetch_page")).to_contain_text("reads, reaches out")
    expect(tools.filter(has_text="drop_table")).to_contain_text("changes")
    expect(tools.filter(has_text="note")).to_contain_text("no annotations: a change")
    expect(row).to_contain_text("running")
    settings.screenshot(path=screenshot_path("mcp-settings"))

    # The agent's form: a checkbox per server.
    settings.get_by_role("tab", name="Your agents").click()
    keeper = settings.locator(".conch-panel:visible .conch-row").filter(has_text="Keeper")
    keeper.get_by_role("button", name="Edit").click()
    agent_form = settings.locator(".conch-form:visible")
    agent_form.get_by_role("checkbox", name="demo").check()
    agent_form.get_by_role("button", name="Save").click()
    expect(agent_form).to_be_hidden(timeout=10_000)
    with lab.client() as http:
        agent = http.get(f"{lab.url}conch/api/agents/keeper").json()
        [server] = http.get(f"{lab.url}conch/api/mcp-servers").json()["servers"]
    assert agent["mcp"] == [server["id"]]
    page.context.close()

    # In a chat (Ask, the default): the destructive tool waits for the user's yes.
    scripted.script(
        Reply(text="I'll drop it.", tool_calls=(("demo__drop_table", {"table": "orders"}),)),
        Reply(text="Dropped orders."),
    )
    page = open_notebook(browser, f"{lab.url}lab/tree/mcp-chat.ipynb?token={lab.token}")
    console = Console(page)
    run_all(page)
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    box = chat.locator(".conch-input")
    box.fill("@Keeper drop the orders table")
    box.press("Enter")
    approval = chat.locator(".conch-approval.is-mcp")
    expect(approval).to_have_count(1, timeout=60_000)
    expect(approval.locator(".conch-approval-head")).to_have_text(
        "Keeper wants to use drop_table of your MCP server demo"
    )
    assert json.loads(approval.locator("pre.conch-code").inner_text()) == {"table": "orders"}
    assert not (marks / "dropped").exists()
    chat.screenshot(path=screenshot_path("mcp-approval"))
    approval.get_by_role("button", name="Allow", exact=True).click()
    expect(approval).to_have_count(0, timeout=10_000)
    line = chat.locator(".conch-tool[data-tool='demo__drop_table']")
    expect(line).to_have_count(1, timeout=30_000)
    expect(line.locator("summary")).to_contain_text("ran")
    expect(chat.locator(".conch-msg.conch-agent .conch-md").last).to_contain_text("Dropped orders.")
    assert (marks / "dropped").read_text() == "orders"
    assert console.errors == []

    # Remove ends it.
    with lab.client() as http:
        gone = http.delete(f"{lab.url}conch/api/mcp-servers/{server['id']}")
        assert gone.status_code == 204
        assert http.get(f"{lab.url}conch/api/agents/keeper").json()["mcp"] == []
    page.context.close()
