"""Every post of Conch's into Jupyter Chat is sealed (issue 38), in a real JupyterLab 4 with
jupyterlab-chat's chat panel in chromium: a corpus of tricks (pictures plain, escaped and by
reference, raw HTML of every kind that loads something, fences that mix ``` and ~~~, entities,
look-alikes, links elsewhere) reaches the chat through each of Conch's writers: your agent's
streamed reply (a scripted model), its error quoted in the round's end line, a coding agent's
reply and its question quoting a command (the scripted ACP agent), an outside agent's words (an
a2a-sdk peer) and a message sent through Conch's API. A picture server on loopback counts the
requests made of it: none, until the test itself shows a picture of it (which proves the page
could reach it); and the page asks nothing of any other host either (its math included). The
panel draws no picture, no raw HTML and no link but http, https and mailto, and shows the words
readably."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from ..server.test_rounds_server import by_speaker
from ..support import acp_agent
from ..support.a2a_peers import Peer
from ..support.browser import screenshot_path
from ..support.lab import Console, Lab, lab_folder, running_lab
from ..support.scripted_models import Reply, ScriptedModels
from .test_lab_chat import messages_of, send, this_checkouts_extension

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

AGENT = str(Path(acp_agent.__file__).resolve())
JOINER = "\u2060"
# 1x1 transparent PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


class Pictures:
    """A picture server on loopback that keeps the path of every request made of it."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self._changed = threading.Condition()
        pictures = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                with pictures._changed:
                    pictures.hits.append(self.path)
                    pictures._changed.notify_all()
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(PNG)))
                self.send_header("Access-Control-Allow-Origin", "*")
                self.end_headers()
                self.wfile.write(PNG)

            do_GET = do_POST = do_HEAD = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def wait_for(self, path: str, timeout: float = 15.0) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: path in self.hits, timeout)

    def __enter__(self) -> Pictures:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def one_line(url: str) -> str:
    """The tricks that fit on one line (a command, an error, the coding agent's `acp:say`)."""
    host = url.removeprefix("http:")
    return " ".join(
        [
            f"![a]({url}/1.png)",
            f"\\![b]({url}/2.png)",
            f"\\\\![c]({url}/3.png)",
            f"![e]({host}/4.png)",
            f"![f](<{url}/5.png>)",
            f'<img src="{url}/6.png">',
            f"<img src={url}/7.png onerror=alert(1)>",
            f'<svg><image href="{url}/8.png"/></svg>',
            f'<video poster="{url}/9.png"></video>',
            f'<div style="background:url({url}/10.png)">styled</div>',
            f"<input type=image src={url}/11.png>",
            f'<iframe src="{url}/12.html"></iframe>',
            f"<link rel=stylesheet href={url}/13.css>",
            f"<object data={url}/14></object>",
            f"&lt;img src={url}/15.png&gt; &#33;[g]({url}/16.png)",
            f"！［h］（{url}/17.png） !\u200b[i]({url}/18.png) !{JOINER}[j]({url}/19.png)",
            f"`` ` ``![k]({url}/20.png)` ``",
            "[js](javascript:alert(1)) [rel](files/x.txt) <javascript:alert(1)>",
            "$\\href{javascript:alert(1)}{math}$",
            f"$\\style{{background-image:url({url}/m1.png)}}{{y}}$ $\\require{{html}}$",
            f"$\\class{{x}}{{z}}$ $\\unicode[{url}/m2.woff]{{x41}}$",
            f"<img src={url}/21.png",
        ]
    )


def corpus(url: str) -> str:
    """Every trick, with the ones that need lines of their own."""
    return "\n".join(
        [
            "Tricks follow.",
            one_line(url),
            "",
            "![ref][r] and [ok](https://example.org/ok)",
            "",
            f"[r]: {url}/30.png",
            "",
            "```",
            "~~~",
            "```",
            f"![l]({url}/31.png)",
            "~~~",
            "",
            "~~~",
            f"<img src={url}/32.png>",
            "~~~",
            "",
            f"<picture><source srcset='{url}/33.png'><img src='{url}/34.png'></picture>",
            "",
            f"<!-- --><img src={url}/35.png>",
            "",
            f"<details open><summary>s</summary><img src={url}/36.png></details>",
            "",
            "The end of the tricks.",
        ]
    )


@pytest.fixture(scope="module")
def pictures() -> Iterator[Pictures]:
    with Pictures() as serving:
        yield serving


@contextmanager
def sealed_lab(root: Path, pictures: Pictures, **lab_options: Any) -> Iterator[Lab]:
    """A lab whose writers all say the corpus: Ann (streamed), Bo (an error), Coder (the
    scripted ACP agent) and Helper (an outside agent). `lab_options` go to running_lab
    (tests/live: another venv's python, with collaboration)."""
    text = corpus(pictures.url)
    failure = {"error": {"message": one_line(pictures.url)}}
    with ScriptedModels() as models, Peer(name="Helper", reply=text) as peer:
        models.responder = by_speaker(
            {
                "Ann": lambda _n: Reply(text=text, delay_per_chunk=0.01),
                "Bo": lambda _n: Reply(status=400, error_body=failure),
            }
        )
        config = this_checkouts_extension(root)
        with running_lab(root, config=config, **lab_options) as running:
            with running.client() as http:
                provider = {"kind": "openai", "model": "m", "base_url": models.openai_url}
                for name in ("Ann", "Bo"):
                    body = {"name": name, "provider": {**provider, "api_key": "k"}}
                    added = http.post(f"{running.url}conch/api/agents", json=body)
                    assert added.status_code == 201, added.text
                coder = {"kind": "acp", "command": sys.executable, "args": [AGENT]}
                added = http.post(
                    f"{running.url}conch/api/agents", json={"name": "Coder", "provider": coder}
                )
                assert added.status_code == 201, added.text
                added = http.post(f"{running.url}conch/api/outside", json={"paste": peer.address})
                assert added.status_code == 201, added.text
            yield running


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, pictures: Pictures) -> Iterator[Lab]:
    root = lab_folder(tmp_path_factory, "lab-chat-seal", {"seal.chat": "{}"})
    with sealed_lab(root, pictures) as running:
        yield running


def room_id(lab: Lab) -> str:
    with lab.client() as http:
        listed = http.get(f"{lab.url}conch/api/conversations").json()["conversations"]
    [room] = [c for c in listed if c.get("chat_file") == "seal.chat"]
    return str(room["id"])


def through_the_api(lab: Lab, text: str) -> None:
    """A message sent to the chat's room through Conch's API (Conch shows it in the chat)."""
    with lab.client() as http:
        sent = http.post(
            f"{lab.url}conch/api/conversations/{room_id(lab)}/messages", json={"text": text}
        )
    assert sent.status_code == 202, sent.text


def shown(message: Locator) -> str:
    return message.inner_text().replace(JOINER, "")


def test_no_post_of_conchs_makes_the_chat_panel_fetch_a_picture(
    browser: Browser, lab: Lab, pictures: Pictures
) -> None:
    nothing_fetched(browser, lab, pictures, "chat-sealed")


def nothing_fetched(browser: Browser, lab: Lab, pictures: Pictures, screenshot: str) -> None:
    """Each writer says the corpus in seal.chat; the panel fetches nothing from elsewhere."""
    page: Page = browser.new_context(viewport={"width": 1280, "height": 1000}).new_page()
    page.goto(f"{lab.url}lab/workspaces/seal/tree/seal.chat?token={lab.token}")
    page.wait_for_selector(".jp-chat-input-container textarea", timeout=60_000)
    console = Console(page)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    conch = messages_of(page, "Conch")
    expect(conch.first).to_contain_text("Conch's agents are in this chat", timeout=30_000)
    line = one_line(pictures.url)
    # Every message's body; Conch's own by their words (the panel names a sender once for the
    # messages it sends in a row).
    posts = page.locator(".jp-chat-rendered-message")

    # Your agent's reply, streamed; then another's error, quoted in the round's end line.
    send(page, "@Ann go")
    expect(posts.filter(has_text="Ann answered")).to_have_count(1, timeout=60_000)
    ann = messages_of(page, "Ann").first
    expect(ann).to_contain_text("The end of the tricks.")
    send(page, "@Bo go")
    expect(posts.filter(has_text="Bo could not answer")).to_have_count(1, timeout=60_000)

    # A coding agent's reply, and its question quoting a command with backticks in it; sent
    # through Conch's API, which Conch shows in the chat too (typed here, the panel would draw
    # the person's own words, which are theirs to draw).
    through_the_api(lab, f"@Coder acp:say {line}")
    coder = messages_of(page, "Coder")
    expect(coder).to_have_count(1, timeout=60_000)
    expect(posts.filter(has_text="Coder answered")).to_have_count(1, timeout=60_000)
    through_the_api(lab, f"@Coder acp:execute echo ` {line} `")
    question = posts.filter(has_text="asks to")
    expect(question).to_have_count(1, timeout=60_000)
    send(page, "/deny")
    expect(coder.filter(has_text="execute: no")).to_have_count(1, timeout=60_000)

    # An outside agent's words.
    send(page, "@Helper go")
    helper = messages_of(page, "Helper")
    expect(helper).to_have_count(1, timeout=60_000)
    expect(helper.first).to_contain_text("The end of the tricks.")
    expect(posts.filter(has_text="Helper answered")).to_have_count(1, timeout=60_000)

    # The panel fetched nothing of the picture server's: the one request it had is the one the
    # test made last, of a picture of its own (which proves the page could reach the server).
    page.evaluate(
        "url => { const i = new Image(); i.src = url; document.body.append(i); }",
        f"{pictures.url}/control.png",
    )
    assert pictures.wait_for("/control.png")
    assert pictures.hits == ["/control.png"]
    # Nor anything else from elsewhere: every request of the page's went to the lab itself.
    elsewhere = [u for u in requests if not u.startswith((lab.url, "data:", "blob:"))]
    assert elsewhere == [f"{pictures.url}/control.png"], elsewhere
    # It draws nothing that loads, and links only to http, https and mailto.
    loads = "img, picture, source, image, video, iframe, object, embed, input, link, style"
    assert posts.locator(loads).count() == 0
    hrefs = posts.locator("a[href]").evaluate_all("links => links.map(a => a.href)")
    assert hrefs
    assert all(h.startswith(("http://", "https://", "mailto:")) for h in hrefs), hrefs

    # Shown readably: the tricks' words are there as text.
    for message in (ann, helper.first):
        words = shown(message)
        assert f'<img src="{pictures.url}/6.png">' in words
        assert "<svg><image href=" in words
        assert f"<img src={pictures.url}/32.png>" in words  # in a fence, as it was written
        assert "Tricks follow." in words
    said = shown(coder.first)
    assert "<iframe src=" in said
    # The question holds the whole command, in its words and in its code: none of it got out.
    command = f"echo ` {line} `"
    asked = shown(question.first)
    assert asked.startswith("Coder asks to Run echo ` ")
    assert "<svg><image href= (question " in asked  # the title, cut by Conch, still words
    # (Conch takes zero-width marks out of a coding agent's tool calls.)
    invisible = str.maketrans("", "", f"\u200b{JOINER}")
    code = shown(question.first.locator("pre code")).strip()
    assert code.translate(invisible) == f"$ {command}".translate(invisible)
    assert "Bo could not answer" in shown(posts.filter(has_text="Bo could not answer").first)
    assert "Sent from Conch's view or API" in shown(posts.filter(has_text="acp:say").first)
    page.screenshot(path=screenshot_path(screenshot), full_page=True)

    assert not [e for e in console.errors if "conch" in e.lower()]
    page.context.close()
