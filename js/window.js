// @ts-check
/**
 * A long chat's log, drawn near where the person reads: the chat opens with a page of its last
 * messages (the stream's snapshot), and scrolling near the top of the log loads the page before
 * (GET conversations/{id}?limit&before), drawn above what is there while the line being read
 * stays where it was. New messages, the streaming reply and the round card are drawn at the
 * bottom as ever: nothing here touches them. Everything loaded stays drawn, so the browser's
 * find-in-page finds it.
 */

/** Messages in the snapshot a view opens with. */
export const VIEW_PAGE = 100;
/** Messages in each page loaded on scrolling up: more than a screen, so a fast scroll to the
 * top of a long chat asks a few dozen times, not a hundred. */
export const EARLIER_PAGE = 250;
// How close to the top (px) the person scrolls before the page before is asked for.
const NEAR_TOP = 600;

/**
 * @param {HTMLElement} log the scrolling list of the chat's items
 * @param {() => Promise<boolean>} loadEarlier asks for the page before; false when none came
 * @returns {{drawn(): void, stop(): void}}
 */
export function scrollBack(log, loadEarlier) {
  let loading = false;
  /** @type {{el: Element, offset: number} | null} the item read when the load began */
  let anchor = null;
  const offset = (/** @type {Element} */ el) => el.getBoundingClientRect().top - log.getBoundingClientRect().top;
  const check = async () => {
    if (loading || log.scrollTop > NEAR_TOP) return;
    const first = log.firstElementChild;
    loading = true;
    anchor = first ? { el: first, offset: offset(first) } : null;
    let came = false;
    try {
      came = await loadEarlier();
    } finally {
      loading = false;
      if (!came) anchor = null;
    }
  };
  log.addEventListener("scroll", check, { passive: true });
  return {
    // After each draw: the item that was first stays where the person saw it, the earlier
    // ones above it; then, if all that is drawn still fits without scrolling, ask for more.
    drawn() {
      if (anchor?.el.isConnected) {
        const moved = offset(anchor.el) - anchor.offset;
        if (moved) log.scrollTop += moved;
        if (!loading && log.firstElementChild !== anchor.el) anchor = null;
      }
      if (!loading && log.clientHeight > 0 && log.scrollHeight <= log.clientHeight) check();
    },
    stop() {
      log.removeEventListener("scroll", check);
    },
  };
}
