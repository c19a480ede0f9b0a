// @ts-check
/**
 * Controls that explain themselves: a control's words in a small tooltip (`role="tooltip"`)
 * shown while the pointer is over it or it has the keyboard's focus, hidden again on leave,
 * blur or Escape; the control names it with `aria-describedby`, so a screen reader says the same
 * words. A browser's own `title` shows only on hover, late, and not on focus: these do all three.
 *
 * The tooltip lives in a host that clips nothing (the chat's header), placed under its control
 * and kept inside the host's width, so a narrow chat shows it whole.
 */

import { h, uid } from "./dom.js";

/** What the header's controls do, in words (the server's rules say the same: notebook/rules.py). */
export const HINTS = {
  ask: "Ask: each run of code and each change to the notebook waits for your yes in this chat.",
  auto: "Auto: agents run code and change the notebook without asking, until an outside agent's words are in this chat; then they ask again.",
  read: "Read: agents can read the notebook and its variables; every run and change is refused.",
  spend:
    "What this chat's replies have cost, against the chat's own limit (and this month's, against the monthly budget). Once a limit is reached, no new reply starts.",
  limit: "Limit: set this chat's own spending limit, in dollars (empty: the server's default).",
};

/**
 * Where a tooltip goes under its control: left-aligned with it, kept inside the host.
 * @param {{left: number, bottom: number}} control the control's box, relative to the host
 * @param {number} tipWidth @param {number} hostWidth
 */
export function placeUnder(control, tipWidth, hostWidth) {
  const left = Math.max(0, Math.min(control.left, hostWidth - tipWidth));
  return { left: Math.round(left), top: Math.round(control.bottom + 4) };
}

/**
 * Give `control` a tooltip of `words` in `host`; `say` changes the words later.
 * @param {HTMLElement} control @param {string} words @param {HTMLElement} host
 */
export function hint(control, words, host) {
  const tip = h("span", { class: "conch-tip", role: "tooltip", id: `conch-tip-${uid()}`, hidden: true, text: words });
  const described = control.getAttribute("aria-describedby");
  control.setAttribute("aria-describedby", described ? `${described} ${tip.id}` : tip.id);
  host.append(tip);
  const show = () => {
    if (!tip.textContent) return;
    tip.hidden = false;
    const at = host.getBoundingClientRect();
    const box = control.getBoundingClientRect();
    const place = placeUnder({ left: box.left - at.left, bottom: box.bottom - at.top }, tip.offsetWidth, host.clientWidth);
    tip.style.left = `${place.left}px`;
    tip.style.top = `${place.top}px`;
  };
  const hide = () => {
    tip.hidden = true;
  };
  control.addEventListener("mouseenter", show);
  control.addEventListener("focus", show);
  control.addEventListener("mouseleave", () => {
    if (document.activeElement !== control) hide();
  });
  control.addEventListener("blur", hide);
  control.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !tip.hidden) hide();
  });
  return {
    tip,
    /** @param {string} next */
    say(next) {
      if (tip.textContent !== next) tip.textContent = next;
    },
  };
}
