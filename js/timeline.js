// @ts-check
/**
 * The chat as the view draws it: what the server said, folded into items in reading order.
 *
 * ChatState takes the event stream's items one by one (a snapshot, then messages, events, reply
 * deltas and the live round state); buildItems turns it into what the view draws: your messages,
 * each agent's reply under its divider, handover lines, outside answers, Conch's notes, a
 * round card where each round began, and each tool call's block under the reply it belongs to
 * (tools.js). Pure: no DOM, no network (tested with node --test).
 *
 * A round card's picture comes from the log alone: the faces are everyone named or heard in it,
 * and each pass of the floor is a change of speaker between one reply and the next (round.asking
 * marks an outside agent's turn). While the round runs, the live round state adds whoever has
 * the floor. The card's words say what its picture shows.
 *
 * The timeline is built here only: where the view draws through the kernel (the relay), the
 * kernel passes the stream's raw items on and chat-source.js feeds them in here all the same.
 */

import { ToolState, toolItem, underReplies, workingWords } from "./tools.js";
import { and, continueWords, costWords, dollars, foldedWords, initials } from "./words.js";

/**
 * @typedef {{[key: string]: any}} Item
 * @typedef {{id: string, name: string}} Named
 * @typedef {{id: string, name: string, clashes_with?: string | null}} NamedOutside
 * @typedef {{agents?: Named[], outside?: NamedOutside[]}} Roster
 * @typedef {import("./mentions.js").Mention} Mention
 */

// At one instant, a round's start sorts after the message that began it and its end after its
// last note (the server stores them in that order).
/** @type {Record<string, number>} */
const RANK = { user: 0, "round.started": 1, message: 2, event: 3, "round.ended": 4 };

/** Who is who: your agents' and outside agents' names by id. */
export class Names {
  constructor() {
    /** @type {Map<string, string>} */
    this.ours = new Map();
    /** @type {Map<string, string>} */
    this.outside = new Map();
    /** @type {Map<string, string>} names messages carried */
    this.heard = new Map();
    /** @type {Map<string, string>} an outside agent's id -> the agent of yours it clashes with */
    this.clashing = new Map();
  }

  /** @param {Roster | undefined} roster */
  learn(roster) {
    if (!roster) return;
    this.ours = new Map((roster.agents || []).map((a) => [a.id, a.name]));
    this.outside = new Map((roster.outside || []).map((a) => [a.id, a.name]));
    this.clashing = new Map();
    for (const a of roster.outside || []) if (a.clashes_with) this.clashing.set(a.id, a.clashes_with);
  }

  /** @param {string} id */
  name(id) {
    return this.ours.get(id) || this.outside.get(id) || this.heard.get(id) || id;
  }

  /**
   * Whom typing @ may offer: your agents, then outside agents, each outside agent with the agent
   * of yours its name clashes with, if any (mentions.js holds such ones back).
   * @returns {Mention[]}
   */
  mentions() {
    return [
      ...[...this.ours.values()].map((name) => ({ name, outside: false })),
      ...[...this.outside].map(([id, name]) => ({ name, outside: true, clashes_with: this.clashing.get(id) ?? null })),
    ];
  }
}

/** One chat as followed: stored messages and events, the live round, replies streaming. */
export class ChatState {
  constructor() {
    /** @type {Map<string, Item>} */
    this.messages = new Map();
    /** @type {Map<number, Item>} */
    this.events = new Map();
    /** @type {Item | null} */
    this.round = null;
    this.busy = false;
    /** @type {Map<string, {agent: string, text: string}>} reply id -> what has streamed */
    this.live = new Map();
    this.names = new Names();
    this.title = "";
    // A long chat comes a page at a time: whether it holds messages before those here, and
    // the oldest here (the next page ends before it).
    this.earlier = false;
    /** @type {string | null} */
    this.first = null;
    // The notebook tools: mode, taint, what asks for a yes, what works now (tools.js).
    this.tools = new ToolState();
    /** @type {Item | null} what was spent against each limit: {round, chat, month} */
    this.budget = null;
    /** @type {{spent: number, limit: number} | null} the latest round's spend, kept once it ends */
    this.roundSpend = null;
    /** @type {Item | null} the last round, stopped at its bound, as the server offers to continue it */
    this.continuable = null;
  }

  /** @param {Item | null | undefined} budget */
  spend(budget) {
    this.budget = budget || null;
    if (budget?.round) this.roundSpend = budget.round;
  }

  /**
   * Take one item of the event stream; say what changed: "items", "live" or "".
   * A snapshot replaces everything, so following again after a dropped stream loses nothing
   * and doubles nothing (messages are kept by id, events by seq).
   * @param {Item} item
   */
  take(item) {
    const tools = this.tools.take(item);
    switch (item?.type) {
      case "snapshot": {
        const chat = item.conversation || {};
        this.messages = new Map((chat.messages || []).map((/** @type {Item} */ m) => [m.id, m]));
        this.events = new Map((chat.events || []).map((/** @type {Item} */ e) => [e.seq, e]));
        this.earlier = Boolean(chat.earlier);
        this.first = chat.messages?.length ? String(chat.messages[0].id) : null;
        this.live_(chat);
        for (const message of this.messages.values()) this.heard(message);
        return "items";
      }
      case "resumed": // a stream that resumed: what it missed came first; here is what is live now
        this.live_(item.conversation || {});
        return "items";
      case "earlier": {
        // A page of earlier messages (loaded as the person scrolls up), with its events.
        const page = item.conversation || {};
        for (const m of page.messages || []) {
          this.messages.set(m.id, m);
          this.heard(m);
        }
        for (const e of page.events || []) this.events.set(e.seq, e);
        this.earlier = Boolean(page.earlier);
        if (page.messages?.length) this.first = String(page.messages[0].id);
        return "items";
      }
      case "message": {
        const message = item.message;
        this.messages.set(message.id, message);
        this.live.delete(message.id);
        this.heard(message);
        return "items";
      }
      case "event": {
        const event = item.event;
        this.events.set(event.seq, event);
        if (event.type === "round.ended") this.busy = false;
        if (event.type === "round.started") {
          // A new round has spent nothing yet: the last one's spend is not its own.
          this.roundSpend = null;
          this.continuable = null;
          if (this.budget) this.budget = { ...this.budget, round: null };
        }
        return "items";
      }
      case "round":
        this.round = item.round || null;
        this.busy = this.busy || this.round !== null;
        return "items";
      case "delta": {
        let reply = this.live.get(item.reply);
        if (!reply) {
          reply = { agent: item.agent, text: "" };
          this.live.set(item.reply, reply);
        }
        reply.text += item.text || "";
        this.busy = true;
        return "live";
      }
      case "roster": // agents or outside agents were added, renamed or removed (anywhere)
        this.names.learn(item.roster);
        return "items";
      case "budget": // a turn was billed, or a limit set
        this.spend(item.budget);
        return "items";
      case "continuable": // the last round can be continued now, or no longer
        this.continuable = item.continuable || null;
        return "items";
      case "working": // the round card's line and the streaming reply say what the agent does
      case "stuck": // what the chat offers under the log
        return tools ? "items" : "";
      default:
        return "";
    }
  }

  /** The live parts of a chat (a snapshot's, or a resumed stream's). @param {Item} chat */
  live_(chat) {
    this.round = chat.round || null;
    this.busy = Boolean(chat.busy);
    this.title = String(chat.title || "");
    this.names.learn(chat.roster);
    this.spend(chat.budget);
    this.continuable = chat.continuable || null;
    this.live = new Map();
    for (const reply of chat.streaming || []) {
      this.live.set(reply.reply, { agent: reply.agent, text: String(reply.text || "") });
    }
  }

  /** @param {Item} message */
  heard(message) {
    if (message.agent && message.name) this.names.heard.set(message.agent, message.name);
  }
}

class Card {
  /** @param {string} id @param {string[]} named */
  constructor(id, named) {
    this.id = id;
    this.named = named;
    /** @type {string[]} */
    this.speakers = [];
    /** @type {Set<string>} */
    this.outside = new Set();
    /** @type {Item | null} */
    this.end = null;
    // What its metered replies cost, from their own lines: the folded card keeps it for good
    // (the chat's budget says only the running round's spend).
    this.spent = 0;
  }

  /** @param {string} agent */
  heard(agent) {
    if (this.speakers[this.speakers.length - 1] !== agent) this.speakers.push(agent);
  }
}

/**
 * Everything but the reply still streaming, in reading order. `offerContinue`: the view can
 * continue a round itself (it talks to the server with the user's own auth), so the latest
 * round, stopped at its bound, offers Continue on its folded card and on its end line at the
 * bottom of the chat.
 * @param {ChatState} state
 * @param {{userLabel?: string, offerContinue?: boolean}} [options]
 * @returns {Item[]}
 */
export function buildItems(state, { userLabel = "You", offerContinue = false } = {}) {
  /** @type {[number, number, string, Item][]} */
  const entries = [];
  for (const message of state.messages.values()) {
    const rank = message.role === "user" ? RANK.user : RANK.message;
    entries.push([Number(message.created || 0), rank, "message", message]);
  }
  const events = [...state.events.values()].sort((a, b) => Number(a.seq) - Number(b.seq));
  for (const event of events) {
    entries.push([Number(event.created || 0), RANK[event.type] ?? RANK.event, "event", event]);
  }
  // Array sort is stable, so equal keys keep the order they were listed in (as Python's).
  entries.sort((a, b) => a[0] - b[0] || a[1] - b[1]);

  /** @type {Item[]} */
  const items = [];
  /** @type {[Card, number][]} */
  const cards = [];
  /** @type {Card | null} */
  let card = null;
  for (const [, , kind, entry] of entries) {
    if (kind === "event") {
      if (entry.type === "round.started") {
        card = new Card(`round-${entry.seq}`, (entry.named || []).map(String));
        cards.push([card, items.length]);
        items.push({});
      } else if (entry.type === "round.asking" && card) {
        card.outside.add(String(entry.agent));
        card.heard(String(entry.agent));
      } else if (entry.type === "round.ended" && card) {
        card.end = entry;
        card = null;
      }
      continue;
    }
    items.push(messageItem(entry, state.names, userLabel));
    if (card && entry.agent && (entry.role === "agent" || entry.role === "outside")) {
      if (entry.role === "outside") card.outside.add(entry.agent);
      card.heard(entry.agent);
      card.spent += Number(entry.cost?.usd) || 0;
    }
  }
  /** @type {Item | null} */
  let endLine = null;
  cards.forEach(([each, place], index) => {
    const latest = index === cards.length - 1;
    const item = cardItem(each, state, latest && each.end === null, latest);
    if (latest && offerContinue && state.continuable && item.state === "folded" && !state.busy) {
      const offer = continueWords(state.continuable, state.budget?.chat);
      item.continues = { line: offer.line, button: offer.button };
      item.announce = `${item.announce}. ${offer.button} is offered at the end of the chat.`;
      endLine = { kind: "continue", id: `continue-${each.id}`, ...offer };
    }
    items[place] = item;
  });
  const ordered = underReplies(items);
  if (endLine) ordered.push(endLine);
  return ordered;
}

/**
 * A chat read once (a snapshot: GET conversations/{id}), as items: "What it said" in Settings.
 * @param {Item} conversation @param {{userLabel?: string}} [options] @returns {Item[]}
 */
export function itemsOf(conversation, options) {
  const state = new ChatState();
  state.take({ type: "snapshot", conversation });
  return buildItems(state, options);
}

/** @param {Item} message @param {Names} names @param {string} userLabel @returns {Item} */
function messageItem(message, names, userLabel) {
  const id = String(message.id);
  const place = message.round || {};
  if (message.role === "note") {
    return { kind: Object.keys(place).length ? "handover" : "note", id, text: String(message.text || "") };
  }
  const html = String(message.html || "");
  if (message.role === "user")
    return message.via ? { kind: "user", id, who: userLabel, html, via: String(message.via) } : { kind: "user", id, who: userLabel, html };
  const agent = String(message.agent || "");
  if (message.role === "tool") return toolItem(message, names.name(agent));
  const item = { id, agent, name: names.name(agent), html };
  if (message.role === "outside") return { kind: "outside", ...item };
  const cost = message.cost ? { cost: costWords(message.cost) } : {};
  return { kind: "agent", ...item, place: placeWords(place, names), ...cost };
}

/** "turn 2 · handed over by Researcher" @param {Item} place @param {Names} names */
export function placeWords(place, names) {
  if (!place || !Object.keys(place).length) return "";
  let words = `turn ${place.turn}`;
  if (place.handed_by) words += ` · handed over by ${names.name(String(place.handed_by))}`;
  return words;
}

/**
 * @param {Card} card @param {ChatState} state @param {boolean} latestOpen
 * @param {boolean} latest the chat's latest round (the one whose spend the view knows)
 * @returns {Item}
 */
function cardItem(card, state, latestOpen, latest) {
  const names = state.names;
  const rnd = latestOpen ? state.round : null;
  const live = latestOpen && (rnd !== null || state.busy);
  const path = [...card.speakers];
  const floorId = rnd?.speaker ? String(rnd.speaker) : null;
  if (floorId && path[path.length - 1] !== floorId) path.push(floorId);
  const order = [...new Set([...card.named, ...path])];
  const outside = new Set([...card.outside, ...order.filter((a) => names.outside.has(a))]);
  const faces = order.map((a) => ({
    id: a,
    name: names.name(a),
    initials: initials(names.name(a)),
    outside: outside.has(a),
  }));
  /** @type {Map<string, number>} */
  const at = new Map(order.map((a, i) => [a, i]));
  const passes = path.slice(1).map((b, i) => [at.get(path[i]) ?? 0, at.get(b) ?? 0]);
  const who = faces.map((f) => f.name + (f.outside ? " (outside agent)" : ""));
  let picture = `In the round: ${and(who)}.`;
  if (passes.length) {
    const hops = passes.map(([a, b]) => `${faces[a].name} to ${faces[b].name}`);
    picture += ` The floor passed from ${hops.join(", then ")}.`;
  }
  const item = { kind: "round", id: card.id, faces, passes };
  if (live) {
    const floor = floorId !== null ? (at.get(floorId) ?? null) : null;
    let line;
    let announce;
    if (floor !== null && rnd) {
      const face = faces[floor];
      const answering = face.name + (face.outside ? " (outside agent)" : "");
      const count = `${Number(rnd.replies || 0) + 1} of ${rnd.limit ?? 8} replies`;
      announce = `${answering} is answering`;
      const working = state.tools.working;
      if (working && String(working.agent) === floorId) announce = workingWords(working, face.name);
      line = `${announce} · ${count}${roundSpent(state.budget?.round)}`;
      picture += ` ${face.name} has the floor.`;
    } else {
      line = announce = card.speakers.length ? "The round is ending" : "The round is starting";
    }
    return { ...item, state: "live", floor, line, announce, picture };
  }
  const spoken = card.speakers.map((a) => names.name(a));
  // The server's words, or (a round the server forgot when it restarted) words of our own.
  let words = card.end?.words || foldedWords(spoken, card.end ? Number(card.end.turns || 0) : spoken.length);
  // What a metered round cost, when it cost something and the words do not say it already:
  // its replies' own costs (the latest round's spend as the server counted it, if more: a
  // resumed stream's messages come without their cost lines).
  const spent = Math.max(card.spent, latest ? Number(state.roundSpend?.spent) || 0 : 0);
  if (spent > 0 && card.end?.reason !== "spend") words += ` · ${dollars(spent)}`;
  const last = path.length ? (at.get(path[path.length - 1]) ?? null) : null;
  return { ...item, state: "folded", floor: last, line: words, announce: words, picture };
}

/**
 * The running round's spend for its card's line, when it has spent something: " · $0.04 of $1".
 * @param {{spent: number, limit: number} | null | undefined} part
 */
function roundSpent(part) {
  if (!part || !(part.spent > 0)) return "";
  return ` · ${dollars(part.spent)} of ${dollars(part.limit).replace(/\.00$/, "")}`;
}

/**
 * The reply streaming now, as plain text (it is drawn sealed once it settles), or null.
 * @param {ChatState} state @returns {Item | null}
 */
export function liveItem(state) {
  if (!state.live.size) return null;
  const [id, reply] = [...state.live.entries()][state.live.size - 1];
  const agent = String(reply.agent || "");
  const notes = [...state.messages.values()].filter((m) => m.role === "note" && m.round);
  const place = notes.length && state.round !== null ? notes[notes.length - 1].round : {};
  return {
    kind: state.names.outside.has(agent) ? "outside" : "agent",
    id,
    agent,
    name: state.names.name(agent),
    place: placeWords(place, state.names),
    text: reply.text,
    streaming: true,
    ...doing(state, agent),
  };
}

/**
 * What a streaming reply's agent is doing with a tool now ("Analyst is running code"), if anything.
 * @param {ChatState} state @param {string} agent @returns {{doing?: string}}
 */
function doing(state, agent) {
  const working = state.tools.working;
  return working && String(working.agent) === agent ? { doing: workingWords(working, state.names.name(agent)) } : {};
}
