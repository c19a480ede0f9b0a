// @ts-check
/**
 * A long chat's log, drawn near where the person reads. The chat opens with a page of its last
 * messages (the stream's snapshot); scrolling near the top of the log loads the page before
 * (GET conversations/{id}?limit&before). Everything loaded stays in the chat's state, but only a
 * span of at most DRAWN items is drawn: scrolling up draws the items above and drops those far
 * below, scrolling down draws them again and drops those far above, and the line being read
 * stays where it was through every change. While the span reaches the chat's end, new messages,
 * the streaming reply and the round card are drawn at the bottom as ever; "Newest messages" (and
 * sending a message) brings the span back there. Find-in-page finds what is drawn: the span is
 * real elements, not hidden ones.
 *
 * The pure core (spanOf: which items to draw, for the span drawn before and the way the person
 * moves) is tested with node --test; windowed() is its thin DOM edge.
 */

/** Messages in the snapshot a view opens with. */
export const VIEW_PAGE = 100;
/** Messages in each page loaded on scrolling up: more than a screen, so a fast scroll to the
 * top of a long chat asks a few dozen times, not a hundred. */
export const EARLIER_PAGE = 250;
/** Items drawn at most: a few dozen screens (about 3,600 elements with items of the usual size,
 * a dozen elements each). */
export const DRAWN = 300;
/** Items drawn at least, however many elements each holds. */
export const FEWEST = 30;
/** Elements the log may hold: where items are heavier than usual (long tool blocks, code), fewer
 * are drawn, so the chat's root stays under 5,000 elements. */
export const LOG_ELEMENTS = 4_000;
/** Items drawn (and dropped at the other end) each time the person nears an end of the span: a
 * third of the span. */
export const STEP = DRAWN / 3;
// How close to an end of what is drawn (px) the person scrolls before the span moves.
const NEAR = 600;

/**
 * What is drawn: the items [from, to) of the chat's, known by their first and last ids (an
 * earlier page put in above moves the indexes, not the ids), and whether it reaches the end.
 * @typedef {{first: string | null, last: string | null, from: number, to: number, follow: boolean}} Span
 * @typedef {"up" | "down" | "newest" | null} Move
 */

/** @type {Span} the span a view opens with: the newest items */
export const NEWEST = { first: null, last: null, from: 0, to: 0, follow: true };

/**
 * Which items to draw now (at most `most`). `stuck`: the person is at the bottom of the log, so new items at the
 * end drop old ones at the top; otherwise a span that would grow over DRAWN stops at the line it
 * reached (the newer items come back as the person scrolls down).
 * @param {string[]} ids every item's id, in reading order
 * @param {Span} was the span drawn before
 * @param {Move} move where the person went: up or down near an end of the span, to the newest
 * @param {boolean} [stuck]
 * @param {number} [most] items drawn at most (DRAWN, or fewer where items are heavy)
 * @returns {Span}
 */
export function spanOf(ids, was, move = null, stuck = false, most = DRAWN) {
  const n = ids.length;
  const step = Math.max(1, Math.floor(most / 3));
  let from;
  let to;
  const first = was.first === null ? -1 : ids.indexOf(was.first);
  // A chat that came again shorter (a new snapshot after a dropped stream) lost what was drawn.
  const lost = first < 0 && was.from >= n;
  if (move === "newest" || was.first === null || lost) {
    to = n;
    from = Math.max(0, n - most);
  } else {
    from = first >= 0 ? first : was.from;
    if (was.follow) {
      to = n;
    } else {
      const last = was.last === null ? -1 : ids.indexOf(was.last);
      to = last >= from ? last + 1 : Math.min(n, from + (was.to - was.from));
    }
    if (to - from > most) {
      if (was.follow && stuck) from = to - most;
      else to = from + most;
    }
    if (move === "up" && from > 0) {
      from = Math.max(0, from - step);
      to = Math.min(to, from + most);
    } else if (move === "down" && to < n) {
      to = Math.min(n, to + step);
      from = Math.max(from, to - most);
    }
  }
  return { first: ids[from] ?? null, last: to > from ? ids[to - 1] : null, from, to, follow: to === n };
}

/**
 * The DOM edge: the log's scroll moves the span, an earlier page is asked for at the top of what
 * is loaded, and the line being read is kept in place through each draw.
 * @param {HTMLElement} log the scrolling list of the chat's items
 * @param {{loadEarlier: () => Promise<boolean>, redraw: () => void}} io
 */
export function windowed(log, { loadEarlier, redraw }) {
  /** @type {Span} */
  let span = NEWEST;
  /** @type {Move} */
  let move = null;
  let stuck = true;
  let loading = false;
  let total = 0;
  let most = DRAWN;
  let measured = ""; // the span whose elements were counted (not again for each streamed word)
  /** @type {{el: Element, offset: number} | null} the item read when the draw began */
  let anchor = null;
  const offset = (/** @type {Element} */ el) => el.getBoundingClientRect().top - log.getBoundingClientRect().top;
  const atBottom = () => log.scrollHeight - log.scrollTop - log.clientHeight < 48;

  // The first item at least partly in sight: it stays where it is through a draw.
  const reading = () => {
    const top = log.getBoundingClientRect().top;
    for (const el of log.children) if (el.getBoundingClientRect().bottom > top) return el;
    return null;
  };

  // The latest way the person went wins; one step a draw (redraw draws once however often asked).
  const ask = (/** @type {Move} */ where) => {
    move = where;
    redraw();
  };
  const earlier = async () => {
    loading = true;
    try {
      await loadEarlier();
    } finally {
      loading = false;
    }
  };
  // Near an end of what is drawn: draw more there, or (the top of what is loaded) ask for more.
  const check = () => {
    if (log.clientHeight === 0) return; // not in sight: nothing to read, nothing to load
    stuck = span.follow && atBottom();
    if (log.scrollTop < NEAR) {
      if (span.from > 0) ask("up");
      else if (!loading) earlier();
    } else if (!span.follow && log.scrollHeight - log.scrollTop - log.clientHeight < NEAR) {
      ask("down");
    }
  };
  log.addEventListener("scroll", check, { passive: true });

  return {
    /** Whether the span reaches the chat's end (the streaming reply is drawn only then). */
    get follow() {
      return span.follow;
    },
    /**
     * Before a draw: the items to draw, of all the chat's; the line being read is noted.
     * @template {{id: string}} T @param {T[]} items @returns {T[]}
     */
    pick(items) {
      span = spanOf(
        items.map((item) => item.id),
        span,
        move,
        stuck,
        most,
      );
      if (move === "newest") stuck = true;
      move = null;
      total = items.length;
      const el = stuck ? null : reading();
      anchor = el ? { el, offset: offset(el) } : null;
      return items.slice(span.from, span.to);
    },
    /** After a draw: the line read stays where it was (or the log at its bottom), then the
     * span moves on if the person is still near one of its ends. */
    placed() {
      if (stuck) log.scrollTop = log.scrollHeight;
      else if (anchor?.el.isConnected) {
        const moved = offset(anchor.el) - anchor.offset;
        if (moved) log.scrollTop += moved;
      }
      anchor = null;
      // As many items as LOG_ELEMENTS allows, at the elements each drawn one holds on average.
      const items = log.children.length;
      const key = `${span.first} ${span.last} ${items}`;
      if (items && key !== measured) {
        measured = key;
        const each = log.getElementsByTagName("*").length / items;
        most = Math.max(FEWEST, Math.min(DRAWN, Math.floor(LOG_ELEMENTS / Math.max(each, 1))));
        if (span.to - span.from > most) redraw();
      }
      if (total) check();
    },
    /** To the newest messages: the span at the chat's end, the log at its bottom. */
    newest() {
      stuck = true;
      move = "newest";
      redraw();
    },
    stop() {
      log.removeEventListener("scroll", check);
    },
  };
}
