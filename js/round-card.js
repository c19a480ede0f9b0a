// @ts-check
/**
 * The round card: everyone in the round as a row of faces, each pass of the floor an arc of
 * pearl light from one face to the next, a pearl travelling along the newest, a working light on
 * whoever has the floor, the line "Writer is answering · 3 of 8 replies" with Stop; once over,
 * folded to one line.
 *
 * Motion runs on the compositor: the pearl travels with `transform` only, arcs appear and dim
 * with `opacity` only, the working light breathes with both. With prefers-reduced-motion the
 * arcs are drawn at once and the pearl rests on the face that has the floor.
 */

import { ARC_Y, STAGE_HEIGHT, arcPoint, arcsOf, at, faceX } from "./arcs.js";
import { continueButton } from "./continue-view.js";
import { h, hue, reducedMotion, s, uid } from "./dom.js";

/**
 * @typedef {{id: string, name: string, initials: string, outside: boolean}} Face
 * @typedef {{
 *   kind: "round", id: string, state: "live" | "folded", faces: Face[], passes: number[][],
 *   floor: number | null, line: string, announce: string, picture: string,
 *   continues?: {line: string, button: string},
 * }} RoundItem
 * @typedef {{announce(words: string): void, stop(): void} & import("./continue-view.js").Context} Context
 * @typedef {import("./arcs.js").Arc} Arc
 */

const PEARL_MS = 1100;
const FOLD_MS = 240;
const ARC_DIM = 0.3; // an older arc's opacity (the CSS says the same)

/** @param {RoundItem} first @param {Context} ctx */
export function roundCard(first, ctx) {
  const id = `conch-round-${uid()}`;
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
      ctx.stop();
    },
  });
  const glyph = () => h("span", { class: "conch-pearl-glyph", "aria-hidden": "true" });
  const bar = h("div", { class: "conch-round-bar" }, glyph(), words, stop);
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
  // Continue, on the folded card of a round stopped at its bound (continue-view.js).
  const going = h("div", { class: "conch-round-continue" });
  let goingLabel = "";
  const el = h("li", { class: "conch-round", "data-round": first.id }, bar, folded, going, stage);
  /** @type {RoundItem | null} */
  let shown = null;
  /** @type {Animation[]} */
  let running = [];
  let drawnFaces = "";
  let drawnArcs = "";
  /** @type {{svg: SVGElement, g: Arc}[]} */
  let layers = [];

  /** @param {RoundItem} item */
  function drawFaces(item) {
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

  /** @param {RoundItem} item */
  function drawArcs(item) {
    const drawn = arcsOf(item.passes, item.faces.length).map((g, i) => {
      const grad = `${id}-g${i}`;
      const svg = s("svg", { class: "conch-arc", viewBox: `0 0 100 ${STAGE_HEIGHT}`, preserveAspectRatio: "none" });
      const defs = s("defs");
      const gradient = s("linearGradient", { id: grad, gradientUnits: "userSpaceOnUse", x1: g.x0, y1: 0, x2: g.x1, y2: 0 });
      gradient.append(s("stop", { offset: "0", class: "conch-arc-from" }), s("stop", { offset: "1", class: "conch-arc-to" }));
      defs.append(gradient);
      svg.append(defs, s("path", { d: `M ${g.x0} ${g.y} Q ${g.cx} ${g.cy} ${g.x1} ${g.y}`, stroke: `url(#${grad})` }));
      svg.classList.toggle("is-newest", i === item.passes.length - 1);
      return { svg, g };
    });
    arcs.replaceChildren(...drawn.map((layer) => layer.svg));
    return drawn;
  }

  /** Where the pearl rests: on top of the face with the floor, or the last one to speak. */
  /** @param {RoundItem} item */
  function rest(item) {
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
    // One agent alone: no floor to pass, so a small card (its face, its line and Stop).
    el.classList.toggle("is-solo", item.faces.length <= 1 && item.passes.length === 0);
    words.textContent = item.line;
    folded.replaceChildren(glyph(), h("span", { text: item.line }));
    const label = item.state === "folded" && item.continues && ctx.continue_ ? item.continues.button : "";
    if (label !== goingLabel) going.replaceChildren(...(label ? [continueButton(label, ctx)] : []));
    going.hidden = !label;
    goingLabel = label;
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
        [
          { opacity: 1, transform: "translateY(0)" },
          { opacity: 0, transform: "translateY(-6px) scale(0.98)" },
        ],
        { duration: FOLD_MS, easing: "ease-in" },
      );
      running = [out];
      out.onfinish = () => {
        el.classList.remove("is-folding");
        el.dataset.state = item.state;
        running = [
          folded.animate(
            [
              { opacity: 0, transform: "translateY(4px)" },
              { opacity: 1, transform: "none" },
            ],
            { duration: 200, easing: "ease-out" },
          ),
        ];
      };
      return;
    }
    if (!el.classList.contains("is-folding")) el.dataset.state = item.state;
  }

  update(first);
  return { el, update, stop: cancel };
}
