// @ts-check
/**
 * Settings' small controls, shared by its sections: a labelled field, and a button that asks
 * once more before doing something that cannot be undone.
 */

import { h } from "./dom.js";

/**
 * A button that asks once more before doing something that cannot be undone.
 * @param {string} label @param {string} ask @param {() => void} act
 */
export function confirmButton(label, ask, act) {
  const button = h("button", { type: "button", class: "conch-button conch-quiet", text: label });
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
export function field(label, control) {
  return h("label", { class: "conch-field" }, h("span", { text: label }), control);
}
