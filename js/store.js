// @ts-check
/**
 * A small observable state with the anywidget model's reading side (get, on/off "change:name"),
 * so a view draws the same way whether its state comes from the kernel's traits (the relay) or
 * from the server directly (kept here, in the page).
 */

export class Store {
  /** @param {Record<string, any>} [initial] */
  constructor(initial = {}) {
    /** @type {Record<string, any>} */
    this.state = { ...initial };
    /** @type {Map<string, Set<(...args: any[]) => void>>} */
    this.handlers = new Map();
  }

  /** @param {string} name */
  get(name) {
    return this.state[name];
  }

  /** Change some values; each one that changed is announced. @param {Record<string, any>} patch */
  update(patch) {
    const changed = Object.keys(patch).filter((name) => this.state[name] !== patch[name]);
    Object.assign(this.state, patch);
    for (const name of changed) this.emit(`change:${name}`);
  }

  /** @param {string} event @param {(...args: any[]) => void} callback */
  on(event, callback) {
    let set = this.handlers.get(event);
    if (!set) {
      set = new Set();
      this.handlers.set(event, set);
    }
    set.add(callback);
  }

  /** @param {string} event @param {(...args: any[]) => void} callback */
  off(event, callback) {
    this.handlers.get(event)?.delete(callback);
  }

  /** @param {string} event @param {...any} args */
  emit(event, ...args) {
    for (const callback of [...(this.handlers.get(event) || [])]) callback(...args);
  }
}
