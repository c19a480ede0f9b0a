// @ts-check
/**
 * Conch's notebook view: the chat (messages, handover lines, outside answers, Conch's notes,
 * round cards, the composer) and Settings (your agents, outside agents, pairings).
 *
 * One self-contained ES module with no imports and no build step: anywidget loads it from a
 * blob URL. Python owns the state in synced traits; this file only draws them and sends the
 * person's actions back as custom messages {type, ...}.
 *
 * Safety: the only HTML ever inserted with innerHTML is the `html` of an item, which Python drew
 * sealed (conch_jupyter/render.py: markdown-it, then an nh3 allowlist). Everything else is built
 * from nodes and textContent.
 *
 * Motion runs on the compositor: the pearl travels with `transform` only, arcs appear and dim
 * with `opacity` only, the working light breathes with both. With prefers-reduced-motion the
 * arcs are drawn at once and the pearl rests on the face that has the floor.
 */

/**
 * @typedef {{
 *   get(name: string): any,
 *   set(name: string, value: any): void,
 *   save_changes(): void,
 *   on(event: string, callback: (...args: any[]) => void): void,
 *   off(event?: string, callback?: (...args: any[]) => void): void,
 *   send(content: any): void,
 * }} Model
 * @typedef {{id: string, name: string, initials: string, outside: boolean}} Face
 * @typedef {{
 *   kind: "round", id: string, state: "live" | "folded", faces: Face[], passes: number[][],
 *   floor: number | null, line: string, announce: string, picture: string,
 * }} RoundItem
 * @typedef {{kind: string, id: string, [key: string]: any}} Item
 * @typedef {{name: string, outside: boolean}} Mention
 * @typedef {{announce(words: string): void, send(content: any): void}} Context
 */

const SVG = "http://www.w3.org/2000/svg";
const STAGE_HEIGHT = 112;
const FACE_Y = 74;
const FACE_RADIUS = 17;
const ARC_Y = FACE_Y - FACE_RADIUS - 3;
const PEARL_MS = 1100;
const FOLD_MS = 240;
const ARC_DIM = 0.3; // an older arc's opacity (the CSS says the same)

let uid = 0;

/** @returns {boolean} */
function reducedMotion() {
  return Boolean(window.matchMedia?.("(prefers-reduced-motion: reduce)").matches);
}

/**
 * A DOM element: `h("li", {class: "conch-note", role: "note"}, "text", child)`.
 * Keys: class, text, html (sealed HTML only), on* (listeners), anything else an attribute.
 * @param {string} tag
 * @param {Record<string, any>} [props]
 * @param {...(Node | string | null | undefined | false)} children
 * @returns {HTMLElement}
 */
function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key === "html") el.innerHTML = value; // sealed HTML from render.py only
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child) el.append(child);
  }
  return el;
}

/** @param {string} tag @param {Record<string, string | number>} [attrs] */
function s(tag, attrs = {}) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  return el;
}

/** A stable hue for a name, so an agent keeps its colour everywhere. @param {string} name */
function hue(name) {
  let sum = 0;
  for (const ch of name) sum = (sum * 31 + (ch.codePointAt(0) || 0)) % 3600;
  return sum % 360;
}

/** @param {string} name @param {string} initials @param {boolean} [outside] */
function disc(name, initials, outside = false) {
  return h("span", {
    class: "conch-disc" + (outside ? " is-outside" : ""),
    style: `--conch-hue: ${hue(name)}`,
    "aria-hidden": "true",
    text: initials,
  });
}

// --- chat items -----------------------------------------------------------------------------

/** @param {Item} item */
function messageItem(item) {
  if (item.kind === "user") {
    return h(
      "li",
      { class: "conch-msg conch-user" },
      h("div", { class: "conch-divider" }, h("span", { class: "conch-who", text: item.who })),
      h("div", { class: "conch-md", html: item.html }),
    );
  }
  if (item.kind === "outside") {
    return h(
      "li",
      { class: "conch-msg conch-outside" + (item.streaming ? " is-streaming" : "") },
      h(
        "div",
        { class: "conch-outside-head" },
        h("span", { class: "conch-outside-mark", text: "Outside agent" }),
        h("span", { class: "conch-who", text: item.name }),
        h("span", { class: "conch-outside-words", text: "someone else's words" }),
      ),
      h("div", { class: "conch-md", html: item.html }),
    );
  }
  return h(
    "li",
    { class: "conch-msg conch-agent" + (item.streaming ? " is-streaming" : "") },
    h(
      "div",
      { class: "conch-divider" },
      disc(item.name, (item.name || "?").slice(0, 1).toUpperCase()),
      h("span", { class: "conch-who", text: item.name }),
      item.place && h("span", { class: "conch-place", text: item.place }),
      item.streaming && h("span", { class: "conch-typing", text: "answering…" }),
    ),
    h("div", { class: "conch-md", html: item.html }),
  );
}

/** @param {Item} item @param {Context} ctx @returns {{el: HTMLElement, update?: (item: any) => void, stop?: () => void}} */
function drawItem(item, ctx) {
  if (item.kind === "round") return roundCard(/** @type {RoundItem} */ (item), ctx);
  if (item.kind === "handover") {
    return { el: h("li", { class: "conch-handover" }, h("span", { text: item.text })) };
  }
  if (item.kind === "note") {
    return {
      el: h(
        "li",
        { class: "conch-note", role: "note" },
        h("span", { class: "conch-note-label", text: "Conch" }),
        h("span", { class: "conch-note-text", text: item.text }),
      ),
    };
  }
  return { el: messageItem(item) };
}

// --- the round card -------------------------------------------------------------------------

/** @param {number} index @param {number} count */
function faceX(index, count) {
  return ((index + 0.5) / count) * 100;
}

/**
 * The arc of one pass: a quadratic curve above the faces, higher for longer passes and for
 * repeats of the same pass, so the picture keeps every pass apart.
 * @param {number} from @param {number} to @param {number} count @param {number} repeat
 */
function arcGeometry(from, to, count, repeat) {
  const x0 = faceX(from, count);
  const x1 = faceX(to, count);
  const lift = Math.min(96, 40 + 0.4 * Math.abs(x1 - x0) + 12 * repeat);
  return { x0, x1, cx: (x0 + x1) / 2, cy: ARC_Y - lift, y: ARC_Y };
}

/** @param {{x0: number, x1: number, cx: number, cy: number, y: number}} g @param {number} t */
function arcPoint(g, t) {
  const u = 1 - t;
  return { x: u * u * g.x0 + 2 * u * t * g.cx + t * t * g.x1, y: u * u * g.y + 2 * u * t * g.cy + t * t * g.y };
}

/** The pearl's track is as big as the stage, so translate(x%, y px) puts the pearl at (x, y). */
/** @param {{x: number, y: number}} p */
function at(p) {
  return `translate(${p.x.toFixed(3)}%, ${p.y.toFixed(2)}px)`;
}

/**
 * @param {RoundItem} first
 * @param {Context} ctx
 */
function roundCard(first, ctx) {
  const id = `conch-round-${++uid}`;
  const stage = h("div", { class: "conch-stage", role: "img" });
  const arcs = h("div", { class: "conch-arcs", "aria-hidden": "true" });
  const faces = h("div", { class: "conch-faces", "aria-hidden": "true" });
  const pearl = h("span", { class: "conch-pearl" });
  const track = h("div", { class: "conch-pearl-track", "aria-hidden": "true" }, pearl);
  stage.append(arcs, faces, track);
  const words = h("span", { class: "conch-round-line" });
  const stop = h("button", {
    type: "button",
    class: "conch-button conch-stop",
    text: "Stop",
    onclick: () => {
      stop.setAttribute("disabled", "");
      stop.textContent = "Stopping…";
      ctx.send({ type: "stop" });
    },
  });
  const bar = h("div", { class: "conch-round-bar" }, h("span", { class: "conch-pearl-glyph", "aria-hidden": "true" }), words, stop);
  const folded = h("button", {
    type: "button",
    class: "conch-round-folded",
    "aria-expanded": "false",
    onclick: () => {
      const open = !el.classList.contains("is-open");
      el.classList.toggle("is-open", open);
      folded.setAttribute("aria-expanded", String(open));
    },
  });
  const el = h("li", { class: "conch-round", "data-round": first.id }, bar, folded, stage);
  /** @type {RoundItem | null} */
  let shown = null;
  /** @type {Animation[]} */
  let running = [];
  let drawnFaces = "";
  let drawnArcs = "";
  /** @type {{svg: SVGElement, g: ReturnType<typeof arcGeometry>}[]} */
  let layers = [];

  function drawFaces(/** @type {RoundItem} */ item) {
    faces.replaceChildren(
      ...item.faces.map((face, i) =>
        h(
          "span",
          {
            class: "conch-face" + (face.outside ? " is-outside" : "") + (i === item.floor && item.state === "live" ? " has-floor" : ""),
            style: `left: ${faceX(i, item.faces.length)}%; --conch-hue: ${hue(face.name)}`,
            "data-face": face.id,
            title: face.outside ? `${face.name} — outside agent` : face.name,
          },
          h("span", { class: "conch-light" }),
          h("span", { class: "conch-disc", text: face.initials }),
          face.outside && h("span", { class: "conch-outside-badge", text: "↗" }),
          h("span", { class: "conch-face-name", text: face.name }),
        ),
      ),
    );
  }

  function drawArcs(/** @type {RoundItem} */ item) {
    const seen = new Map();
    const count = item.faces.length;
    const layers = item.passes.map(([from, to], i) => {
      const key = `${from}>${to}`;
      const repeat = seen.get(key) || 0;
      seen.set(key, repeat + 1);
      const g = arcGeometry(from, to, count, repeat);
      const grad = `${id}-g${i}`;
      const svg = s("svg", { class: "conch-arc", viewBox: `0 0 100 ${STAGE_HEIGHT}`, preserveAspectRatio: "none" });
      const defs = s("defs");
      const gradient = s("linearGradient", { id: grad, gradientUnits: "userSpaceOnUse", x1: g.x0, y1: 0, x2: g.x1, y2: 0 });
      gradient.append(
        s("stop", { offset: "0", class: "conch-arc-from" }),
        s("stop", { offset: "1", class: "conch-arc-to" }),
      );
      defs.append(gradient);
      svg.append(defs, s("path", { d: `M ${g.x0} ${g.y} Q ${g.cx} ${g.cy} ${g.x1} ${g.y}`, stroke: `url(#${grad})` }));
      svg.classList.toggle("is-newest", i === item.passes.length - 1);
      return { svg, g };
    });
    arcs.replaceChildren(...layers.map((layer) => layer.svg));
    return layers;
  }

  /** Where the pearl rests: on top of the face with the floor, or the last one to speak. */
  function rest(/** @type {RoundItem} */ item) {
    if (item.floor === null || item.floor === undefined) return null;
    return { x: faceX(item.floor, item.faces.length), y: ARC_Y };
  }

  function cancel() {
    for (const animation of running) animation.cancel();
    running = [];
  }

  /** @param {RoundItem} item */
  function update(item) {
    const before = shown;
    shown = item;
    const grew = before !== null && before.state === "live" && item.passes.length > before.passes.length;
    const folding = before !== null && before.state === "live" && item.state === "folded";
    stage.setAttribute("aria-label", item.picture);
    words.textContent = item.line;
    folded.replaceChildren(h("span", { class: "conch-pearl-glyph", "aria-hidden": "true" }), h("span", { text: item.line }));
    if (item.state === "live") {
      stop.removeAttribute("disabled");
      stop.textContent = "Stop";
    }
    // Redraw only what changed, so a running animation keeps its element.
    const facesKey = JSON.stringify([item.faces, item.floor, item.state]);
    if (facesKey !== drawnFaces) drawFaces(item);
    drawnFaces = facesKey;
    const arcsKey = JSON.stringify([item.faces.length, item.passes]);
    if (arcsKey !== drawnArcs) layers = drawArcs(item);
    drawnArcs = arcsKey;
    const place = rest(item);
    pearl.hidden = place === null || item.state !== "live";
    if (place) track.style.transform = at(place);
    if (before === null || item.announce !== before.announce) {
      if (before !== null || item.state === "live") ctx.announce(item.announce);
    }
    const motion = !reducedMotion();
    if (grew && motion && layers.length) {
      cancel();
      const newest = layers[layers.length - 1];
      const frames = [];
      for (let k = 0; k <= 24; k++) frames.push({ transform: at(arcPoint(newest.g, k / 24)) });
      running = [
        track.animate(frames, { duration: PEARL_MS, easing: "cubic-bezier(.45,0,.25,1)" }),
        newest.svg.animate([{ opacity: 0 }, { opacity: 1 }], { duration: PEARL_MS, easing: "ease-out" }),
      ];
      const previous = layers[layers.length - 2];
      if (previous) {
        // The arc that was newest dims as the new one lights up.
        running.push(previous.svg.animate([{ opacity: 1 }, { opacity: ARC_DIM }], { duration: PEARL_MS, easing: "ease-in-out" }));
      }
    }
    if (folding && motion) {
      cancel();
      el.classList.add("is-folding");
      const out = stage.animate(
        [{ opacity: 1, transform: "translateY(0)" }, { opacity: 0, transform: "translateY(-6px) scale(0.98)" }],
        { duration: FOLD_MS, easing: "ease-in" },
      );
      running = [out];
      out.onfinish = () => {
        el.classList.remove("is-folding");
        el.dataset.state = item.state;
        running = [folded.animate([{ opacity: 0, transform: "translateY(4px)" }, { opacity: 1, transform: "none" }], { duration: 200, easing: "ease-out" })];
      };
      return;
    }
    if (!el.classList.contains("is-folding")) el.dataset.state = item.state;
  }

  update(first);
  return { el, update, stop: cancel };
}

// --- the composer -----------------------------------------------------------------------------

/**
 * The text box: Enter sends, Shift+Enter breaks the line, and typing @ lists your agents and
 * then outside agents, filtered as you type, chosen with the arrow keys and Enter (or Tab), or
 * with the mouse.
 * @param {Model} model
 */
function composer(model) {
  const listId = `conch-mentions-${++uid}`;
  const input = /** @type {HTMLTextAreaElement} */ (
    h("textarea", {
      class: "conch-input",
      rows: 1,
      role: "combobox",
      "aria-autocomplete": "list",
      "aria-expanded": "false",
      "aria-controls": listId,
      "aria-label": "Message",
    })
  );
  const list = h("ul", { class: "conch-mentions", role: "listbox", id: listId, "aria-label": "Agents", hidden: true });
  const hint = h("div", { class: "conch-hint", "aria-live": "polite" });
  const form = h(
    "form",
    { class: "conch-composer" },
    h("div", { class: "conch-composer-row" }, input, h("button", { type: "submit", class: "conch-button conch-send", text: "Send" })),
    list, // in the flow, under the box: no output area can clip it
    hint,
  );
  /** @type {Mention[]} */
  let options = [];
  let active = 0;
  /** @type {{start: number, end: number} | null} */
  let token = null;

  function mentionAt() {
    const pos = input.selectionStart;
    if (pos !== input.selectionEnd) return null;
    const match = /(^|[\s([{"'])@([^@\n]{0,40})$/u.exec(input.value.slice(0, pos));
    if (!match) return null;
    return { start: pos - match[2].length - 1, end: pos, query: match[2].toLowerCase() };
  }

  function refresh() {
    const found = mentionAt();
    /** @type {Mention[]} */
    const all = model.get("mentions") || [];
    options = [];
    if (found) {
      const q = found.query;
      const prefix = all.filter((m) => m.name.toLowerCase().startsWith(q));
      const inside = q && !q.includes(" ") ? all.filter((m) => !prefix.includes(m) && m.name.toLowerCase().includes(q)) : [];
      const ranked = [...prefix, ...inside];
      options = [...ranked.filter((m) => !m.outside), ...ranked.filter((m) => m.outside)];
    }
    token = options.length && found ? { start: found.start, end: found.end } : null;
    active = Math.min(active, Math.max(0, options.length - 1));
    drawList();
  }

  function drawList() {
    const open = options.length > 0;
    list.hidden = !open;
    input.setAttribute("aria-expanded", String(open));
    if (!open) {
      input.removeAttribute("aria-activedescendant");
      list.replaceChildren();
      return;
    }
    const rows = [];
    let group = "";
    options.forEach((option, i) => {
      const label = option.outside ? "Outside agents" : "Your agents";
      if (label !== group) {
        group = label;
        rows.push(h("li", { class: "conch-mention-group", role: "presentation", text: label }));
      }
      rows.push(
        h(
          "li",
          {
            class: "conch-mention" + (i === active ? " is-active" : ""),
            role: "option",
            id: `${listId}-${i}`,
            "aria-selected": String(i === active),
            onmousedown: (/** @type {MouseEvent} */ event) => {
              event.preventDefault(); // keep the focus in the text box
              choose(i);
            },
          },
          disc(option.name, option.name.slice(0, 1).toUpperCase(), option.outside),
          h("span", { class: "conch-mention-name", text: option.name }),
          option.outside && h("span", { class: "conch-mention-tag", text: "outside" }),
        ),
      );
    });
    list.replaceChildren(...rows);
    input.setAttribute("aria-activedescendant", `${listId}-${active}`);
  }

  /** @param {number} i */
  function choose(i) {
    const option = options[i];
    if (!option || !token) return;
    const text = `@${option.name} `;
    input.value = input.value.slice(0, token.start) + text + input.value.slice(token.end);
    const caret = token.start + text.length;
    input.setSelectionRange(caret, caret);
    options = [];
    token = null;
    drawList();
    grow();
  }

  function grow() {
    input.style.height = "auto";
    input.style.height = `${Math.min(input.scrollHeight, 200)}px`;
  }

  function submit() {
    const text = input.value;
    if (!text.trim()) return;
    model.send({ type: "send", text });
    input.value = "";
    grow();
  }

  input.addEventListener("keydown", (event) => {
    if (options.length) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        active = (active + (event.key === "ArrowDown" ? 1 : options.length - 1)) % options.length;
        drawList();
        return;
      }
      if (event.key === "Enter" || event.key === "Tab") {
        event.preventDefault();
        choose(active);
        return;
      }
      if (event.key === "Escape") {
        event.preventDefault();
        options = [];
        drawList();
        return;
      }
    }
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submit();
    }
  });
  input.addEventListener("input", () => {
    active = 0;
    refresh();
    grow();
  });
  input.addEventListener("click", refresh);
  input.addEventListener("blur", () => {
    options = [];
    drawList();
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit();
  });

  function draw() {
    const running = Boolean(model.get("round_running"));
    input.placeholder = running ? "Write to end the round (@ to mention)" : "Message your agents (@ to mention)";
    const notice = model.get("notice") || "";
    const words = notice || (running ? "Sending now ends the round." : "Enter sends · Shift+Enter breaks the line");
    if (hint.textContent !== words) hint.textContent = words; // a live region: say each thing once
    hint.classList.toggle("is-notice", Boolean(notice || running));
  }

  /** @param {string} text */
  function restore(text) {
    if (!input.value) {
      input.value = text;
      grow();
    }
  }

  return { el: form, draw, restore, input };
}

// --- the chat view ----------------------------------------------------------------------------

/** @param {Model} model @param {HTMLElement} el */
function chatView(model, el) {
  const title = h("span", { class: "conch-title" });
  const problem = h("div", { class: "conch-problem", role: "alert", hidden: true });
  const log = h("ol", { class: "conch-log", "aria-label": "Chat" });
  const status = h("div", { class: "conch-sr-only", role: "status", "aria-live": "polite" });
  const box = composer(model);
  const root = h(
    "div",
    { class: "conch conch-chat" },
    h("div", { class: "conch-head" }, h("span", { class: "conch-mark", "aria-hidden": "true" }), title),
    problem,
    log,
    box.el,
    status,
  );
  el.append(root);

  /** @type {Context} */
  const ctx = {
    announce: (words) => {
      if (words && status.textContent !== words) status.textContent = words;
    },
    send: (content) => model.send(content),
  };
  /** @type {Map<string, {el: HTMLElement, sig: string, update?: (item: any) => void, stop?: () => void}>} */
  const drawn = new Map();
  /** @type {{el: HTMLElement, sig: string} | null} */
  let live = null;
  let queued = false;
  // The log stays at its newest line unless the person has scrolled up to read.
  let stuck = true;
  const onScroll = () => {
    stuck = log.scrollHeight - log.scrollTop - log.clientHeight < 48;
  };
  log.addEventListener("scroll", onScroll);
  const toBottom = () => {
    if (stuck) log.scrollTop = log.scrollHeight;
  };

  function draw() {
    queued = false;
    title.textContent = model.get("title") || "Conch";
    const words = model.get("problem") || "";
    problem.hidden = !words;
    problem.textContent = words;
    /** @type {Item[]} */
    const items = model.get("items") || [];
    const keep = new Set();
    /** @type {HTMLElement[]} */
    const order = [];
    for (const item of items) {
      keep.add(item.id);
      const sig = JSON.stringify(item);
      let entry = drawn.get(item.id);
      if (entry && entry.sig !== sig) {
        if (entry.update && item.kind === "round") {
          entry.update(item);
          entry.sig = sig;
        } else {
          entry.stop?.();
          entry.el.remove();
          entry = undefined;
        }
      }
      if (!entry) {
        entry = { ...drawItem(item, ctx), sig };
        drawn.set(item.id, entry);
      }
      order.push(entry.el);
    }
    for (const [id, entry] of drawn) {
      if (!keep.has(id)) {
        entry.stop?.();
        entry.el.remove();
        drawn.delete(id);
      }
    }
    const streaming = model.get("live");
    if (streaming) {
      const sig = JSON.stringify(streaming);
      if (!live || live.sig !== sig) {
        const el = messageItem(streaming);
        live?.el.replaceWith(el);
        live = { el, sig };
      }
      order.push(live.el);
    } else if (live) {
      live.el.remove();
      live = null;
    }
    // Move only what is out of place: moving a node would restart its animations.
    order.forEach((node, i) => {
      if (log.children[i] !== node) log.insertBefore(node, log.children[i] || null);
    });
    box.draw();
    toBottom();
    requestAnimationFrame(toBottom); // the first draw may happen before the view is attached
  }

  function schedule() {
    if (!queued) {
      queued = true;
      queueMicrotask(draw);
    }
  }

  /** @param {any} message */
  function onMessage(message) {
    if (message?.type === "send.failed") box.restore(String(message.text || ""));
  }

  const traits = ["items", "live", "title", "problem", "notice", "round_running", "mentions"];
  for (const name of traits) model.on(`change:${name}`, schedule);
  model.on("msg:custom", onMessage);
  draw();
  return () => {
    for (const name of traits) model.off(`change:${name}`, schedule);
    model.off("msg:custom", onMessage);
    for (const entry of drawn.values()) entry.stop?.();
    root.remove();
  };
}

// --- settings ---------------------------------------------------------------------------------

const SECTIONS = [
  ["agents", "Your agents"],
  ["outside", "Outside agents"],
  ["pairings", "Agents that can talk to yours"],
];

/**
 * A button that asks once more before doing something that cannot be undone.
 * @param {string} label @param {string} ask @param {() => void} act
 */
function confirmButton(label, ask, act) {
  const button = h("button", { type: "button", class: "conch-button conch-quiet" , text: label });
  let armed = false;
  button.addEventListener("click", () => {
    if (!armed) {
      armed = true;
      button.textContent = ask;
      button.classList.add("is-armed");
      return;
    }
    act();
  });
  button.addEventListener("blur", () => {
    armed = false;
    button.textContent = label;
    button.classList.remove("is-armed");
  });
  return button;
}

/** @param {string} label @param {HTMLElement} control */
function field(label, control) {
  return h("label", { class: "conch-field" }, h("span", { text: label }), control);
}

/** @param {Model} model */
function agentForm(model) {
  /** @param {string} name @param {Record<string, any>} [props] */
  const input = (name, props = {}) => /** @type {HTMLInputElement} */ (h("input", { name, ...props }));
  const name = input("name", { required: true, maxlength: 40 });
  const persona = /** @type {HTMLTextAreaElement} */ (h("textarea", { name: "persona", rows: 2 }));
  const instructions = /** @type {HTMLTextAreaElement} */ (h("textarea", { name: "instructions", rows: 3 }));
  const kind = /** @type {HTMLSelectElement} */ (
    h("select", { name: "kind" }, ...["offline", "openai", "anthropic"].map((k) => h("option", { value: k, text: k })))
  );
  const modelName = input("model");
  const baseUrl = input("base_url", { placeholder: "https://… (leave empty for the provider's own)" });
  const key = input("api_key", { type: "password", autocomplete: "off" });
  const priceIn = input("input_per_mtok", { type: "number", min: 0, step: "any", placeholder: "in" });
  const priceOut = input("output_per_mtok", { type: "number", min: 0, step: "any", placeholder: "out" });
  const heading = h("h4", { class: "conch-form-title" });
  /** @type {string | null} */
  let editing = null;
  const form = h(
    "form",
    { class: "conch-form", hidden: true },
    heading,
    field("Name", name),
    field("Persona (what others see)", persona),
    field("Instructions (only for this agent)", instructions),
    h("div", { class: "conch-field-row" }, field("Provider", kind), field("Model", modelName)),
    field("Address", baseUrl),
    field("Key", key),
    h("div", { class: "conch-field-row" }, field("$ per million tokens in", priceIn), field("out", priceOut)),
    h(
      "div",
      { class: "conch-actions" },
      h("button", { type: "submit", class: "conch-button", text: "Save" }),
      h("button", { type: "button", class: "conch-button conch-quiet", text: "Cancel", onclick: () => close() }),
    ),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    /** @type {Record<string, any>} */
    const provider = { kind: kind.value, model: modelName.value.trim(), base_url: baseUrl.value.trim() || null };
    if (key.value) provider.api_key = key.value;
    const priced = priceIn.value !== "" || priceOut.value !== "";
    const agent = {
      name: name.value.trim(),
      persona: persona.value,
      instructions: instructions.value,
      provider,
      price: priced ? { input_per_mtok: Number(priceIn.value || 0), output_per_mtok: Number(priceOut.value || 0) } : null,
    };
    model.send({ type: "agent.save", id: editing, agent });
  });

  /** @param {any} agent */
  function open(agent) {
    editing = agent ? agent.id : null;
    heading.textContent = agent ? `Edit ${agent.name}` : "Add an agent";
    name.value = agent?.name || "";
    persona.value = agent?.persona || "";
    instructions.value = agent?.instructions || "";
    kind.value = agent?.provider?.kind || "offline";
    modelName.value = agent?.provider?.model || "";
    baseUrl.value = agent?.provider?.base_url || "";
    key.value = "";
    key.placeholder = agent?.has_key ? "a key is kept; leave empty to keep it" : "leave empty to use the environment's";
    priceIn.value = agent?.price ? String(agent.price.input_per_mtok) : "";
    priceOut.value = agent?.price ? String(agent.price.output_per_mtok) : "";
    form.hidden = false;
    name.focus();
  }

  function close() {
    form.hidden = true;
    editing = null;
  }

  return { el: form, open, close };
}

/** @param {Model} model @param {HTMLElement} el */
function settingsView(model, el) {
  const tabs = h("div", { class: "conch-tabs", role: "tablist", "aria-label": "Settings" });
  const panels = /** @type {Record<string, HTMLElement>} */ ({});
  const problems = /** @type {Record<string, HTMLElement>} */ ({});
  const lists = /** @type {Record<string, HTMLElement>} */ ({});
  const notes = /** @type {Record<string, HTMLElement>} */ ({});
  const tabButtons = SECTIONS.map(([key, label]) => {
    const button = h("button", {
      type: "button",
      role: "tab",
      class: "conch-tab",
      id: `conch-tab-${key}-${++uid}`,
      text: label,
      onclick: () => {
        model.set("section", key);
        model.save_changes();
      },
    });
    problems[key] = h("div", { class: "conch-problem", role: "alert", hidden: true });
    notes[key] = h("p", { class: "conch-muted", hidden: true });
    lists[key] = h("ul", { class: "conch-rows" });
    panels[key] = h("section", { class: "conch-panel", role: "tabpanel", "aria-labelledby": button.id });
    return button;
  });
  tabs.append(...tabButtons);
  // Arrow keys move between the tabs, as a tab list's do.
  tabs.addEventListener("keydown", (event) => {
    const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (!step) return;
    event.preventDefault();
    const now = SECTIONS.findIndex(([key]) => key === (model.get("section") || "agents"));
    const next = (now + step + SECTIONS.length) % SECTIONS.length;
    model.set("section", SECTIONS[next][0]);
    model.save_changes();
    tabButtons[next].focus();
  });

  // Your agents.
  const form = agentForm(model);
  panels.agents.append(
    h("p", { class: "conch-muted", text: "Mention an agent with @ and its name to start a round." }),
    problems.agents,
    lists.agents,
    h("button", { type: "button", class: "conch-button", text: "Add an agent", onclick: () => form.open(null) }),
    form.el,
  );

  // Outside agents.
  const paste = /** @type {HTMLTextAreaElement} */ (
    h("textarea", { class: "conch-paste", rows: 2, "aria-label": "Outside agent's address and key", placeholder: "Paste the agent's address (and its key, if you were given one)" })
  );
  const outsideForm = h(
    "form",
    { class: "conch-form conch-inline", onsubmit: (/** @type {Event} */ e) => {
      e.preventDefault();
      model.send({ type: "outside.add", paste: paste.value });
    } },
    paste,
    h("button", { type: "submit", class: "conch-button", text: "Add" }),
  );
  const repair = h("button", {
    type: "button",
    class: "conch-button conch-quiet",
    text: "Repair everything",
    onclick: () => model.send({ type: "outside.repair" }),
  });
  panels.outside.append(
    h("p", { class: "conch-muted", text: "An outside agent lives elsewhere. It is sent only the words of a message that mentions it, and its answers are someone else's words." }),
    notes.outside,
    problems.outside,
    lists.outside,
    h("div", { class: "conch-actions" }, repair),
    outsideForm,
  );

  // Agents that can talk to yours.
  const choices = h("div", { class: "conch-choices" });
  const remote = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox" }));
  const once = h("div", { class: "conch-once", hidden: true, role: "region", "aria-label": "Shown once" });
  const said = h("div", { class: "conch-said", hidden: true });
  const pairForm = h(
    "form",
    { class: "conch-form", onsubmit: (/** @type {Event} */ e) => {
      e.preventDefault();
      const agents = [...choices.querySelectorAll("input:checked")].map((box) => /** @type {HTMLInputElement} */ (box).value);
      model.send({ type: "pairing.add", agents, remote: remote.checked });
    } },
    h("h4", { class: "conch-form-title", text: "Pair an agent" }),
    choices,
    h("label", { class: "conch-check" }, remote, h("span", { text: "It runs on another computer (this turns on “From your own address” for other apps)" })),
    h("div", { class: "conch-actions" }, h("button", { type: "submit", class: "conch-button", text: "Pair" })),
  );
  panels.pairings.append(
    h("p", { class: "conch-muted", text: "Off until you pair one: another agent reaches yours only with the key a pairing gives it, and gets words only." }),
    notes.pairings,
    problems.pairings,
    once,
    lists.pairings,
    said,
    pairForm,
  );

  const root = h("div", { class: "conch conch-settings" }, tabs, ...Object.values(panels));
  el.append(root);

  function drawAgents() {
    /** @type {any[]} */
    const agents = model.get("agents") || [];
    lists.agents.replaceChildren(
      ...agents.map((agent) =>
        h(
          "li",
          { class: "conch-row" },
          disc(agent.name, agent.name.slice(0, 1).toUpperCase()),
          h(
            "div",
            { class: "conch-row-main" },
            h("strong", { text: agent.name }),
            agent.persona && h("span", { class: "conch-muted", text: agent.persona }),
            h(
              "span",
              { class: "conch-small" },
              [agent.provider?.kind, agent.provider?.model].filter(Boolean).join(" · ") +
                (agent.price ? ` · $${agent.price.input_per_mtok}/$${agent.price.output_per_mtok} per M tokens` : " · not metered") +
                (agent.has_key ? " · key kept" : ""),
            ),
          ),
          h(
            "div",
            { class: "conch-row-actions" },
            h("button", { type: "button", class: "conch-button conch-quiet", text: "Edit", onclick: () => form.open(agent) }),
            confirmButton("Remove", `Remove ${agent.name}?`, () => model.send({ type: "agent.remove", id: agent.id })),
          ),
        ),
      ),
    );
    choices.replaceChildren(
      ...agents.map((agent) =>
        h("label", { class: "conch-check" }, h("input", { type: "checkbox", value: agent.id }), h("span", { text: agent.name })),
      ),
    );
  }

  function drawOutside() {
    /** @type {any[] | null} */
    const rows = model.get("outside");
    const off = rows === null;
    outsideForm.hidden = off;
    repair.hidden = off || !rows.length;
    lists.outside.replaceChildren(
      ...(rows || []).map((agent) =>
        h(
          "li",
          { class: "conch-row" },
          disc(agent.name, agent.name.slice(0, 1).toUpperCase(), true),
          h(
            "div",
            { class: "conch-row-main" },
            h("strong", { text: agent.name }),
            h("code", { class: "conch-small", text: agent.address }),
            agent.claim && h("span", { class: "conch-claim", text: `It says it's run by ${agent.claim}` }),
            h("span", { class: "conch-small", text: agent.has_key ? "Key kept, sealed" : "No key" }),
            agent.last_problem && h("span", { class: "conch-row-problem", text: `Last problem: ${agent.last_problem}` }),
          ),
          h("div", { class: "conch-row-actions" }, confirmButton("Remove", `Remove ${agent.name}?`, () => model.send({ type: "outside.remove", id: agent.id }))),
        ),
      ),
    );
  }

  function drawPairings() {
    /** @type {any[] | null} */
    const rows = model.get("pairings");
    /** @type {any[]} */
    const agents = model.get("agents") || [];
    const nameOf = (/** @type {string} */ id) => agents.find((a) => a.id === id)?.name || id;
    pairForm.hidden = rows === null;
    lists.pairings.replaceChildren(
      ...(rows || []).map((pairing) =>
        h(
          "li",
          { class: "conch-row" },
          h(
            "div",
            { class: "conch-row-main" },
            h("strong", { text: (pairing.agents || []).map(nameOf).join(", ") }),
            h("span", { class: "conch-small", text: pairing.remote ? "On another computer" : "On this computer" }),
            pairing.address && h("code", { class: "conch-small", text: pairing.address }),
            pairing.created && h("span", { class: "conch-small", text: `Paired ${new Date(pairing.created * 1000).toLocaleString()}` }),
          ),
          h(
            "div",
            { class: "conch-row-actions" },
            h("button", { type: "button", class: "conch-button conch-quiet", text: "What it said", onclick: () => model.send({ type: "pairing.said", id: pairing.id }) }),
            confirmButton("Remove", "Remove: it can no longer reach you", () => model.send({ type: "pairing.remove", id: pairing.id })),
          ),
        ),
      ),
    );
    const what = model.get("said");
    said.hidden = !what;
    if (what) {
      /** @type {Context} */
      const quiet = { announce: () => {}, send: () => {} };
      said.replaceChildren(
        h(
          "div",
          { class: "conch-said-head" },
          h("h4", { class: "conch-form-title", text: "What it said" }),
          h("button", { type: "button", class: "conch-button conch-quiet", text: "Close", onclick: () => model.send({ type: "said.close" }) }),
        ),
        ...(what.note ? [h("p", { class: "conch-muted", text: what.note })] : []),
        ...(what.chats || []).map((/** @type {any} */ chat) =>
          h("ol", { class: "conch-log conch-said-chat" }, ...chat.items.map((/** @type {Item} */ item) => drawItem(item, quiet).el)),
        ),
      );
    }
  }

  /** The address and key, shown once: kept in this view only, never in the saved state. */
  /** @param {any} made */
  function showOnce(made) {
    const text = made.paste || `${made.address}\n${made.key}`;
    const copy = h("button", { type: "button", class: "conch-button", text: "Copy" });
    const block = h("pre", { class: "conch-secret", tabindex: 0, text });
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(text);
        copy.textContent = "Copied";
      } catch {
        const range = document.createRange();
        range.selectNodeContents(block);
        window.getSelection()?.removeAllRanges();
        window.getSelection()?.addRange(range);
        copy.textContent = "Selected: press Ctrl+C";
      }
    });
    once.replaceChildren(
      h("strong", { text: "Give this to the other agent. It is shown only this once." }),
      block,
      h("div", { class: "conch-small" }, h("span", { text: "Address: " }), h("code", { text: made.address || "" })),
      ...(made.note ? [h("p", { class: "conch-small", text: made.note })] : []),
      h(
        "div",
        { class: "conch-actions" },
        copy,
        h("button", { type: "button", class: "conch-button conch-quiet", text: "Done", onclick: () => { once.hidden = true; once.replaceChildren(); } }),
      ),
    );
    once.hidden = false;
  }

  function draw() {
    const section = model.get("section") || "agents";
    const working = model.get("working") || "";
    const unavailable = model.get("unavailable") || {};
    const problem = model.get("problem") || {};
    SECTIONS.forEach(([key], i) => {
      tabButtons[i].setAttribute("aria-selected", String(key === section));
      tabButtons[i].tabIndex = key === section ? 0 : -1;
      panels[key].hidden = key !== section;
      problems[key].hidden = !problem[key];
      problems[key].textContent = problem[key] || "";
      notes[key].hidden = !unavailable[key];
      notes[key].textContent = unavailable[key] || "";
    });
    root.classList.toggle("is-working", Boolean(working));
    drawAgents();
    drawOutside();
    drawPairings();
  }

  /** @param {any} message */
  function onMessage(message) {
    if (message?.type === "pairing.created") showOnce(message);
    if (message?.type === "done" && message.ok) {
      if (message.action === "agent.save") form.close();
      if (message.action === "outside.add") paste.value = "";
      if (message.action === "pairing.add") {
        remote.checked = false;
        for (const box of choices.querySelectorAll("input")) /** @type {HTMLInputElement} */ (box).checked = false;
      }
    }
  }

  const traits = ["section", "agents", "outside", "pairings", "unavailable", "said", "problem", "working"];
  for (const name of traits) model.on(`change:${name}`, draw);
  model.on("msg:custom", onMessage);
  draw();
  return () => {
    for (const name of traits) model.off(`change:${name}`, draw);
    model.off("msg:custom", onMessage);
    root.remove();
  };
}

export default {
  /** @param {{model: Model, el: HTMLElement}} props */
  render({ model, el }) {
    return model.get("view") === "settings" ? settingsView(model, el) : chatView(model, el);
  },
};
