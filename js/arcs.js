// @ts-check
/**
 * The round card's geometry, pure: where each face sits on the stage, the arc of one pass of the
 * floor, points along it (the pearl's path), and the transform that puts the pearl there.
 */

export const STAGE_HEIGHT = 112;
export const FACE_Y = 74;
export const FACE_RADIUS = 17;
export const ARC_Y = FACE_Y - FACE_RADIUS - 3;

/** @typedef {{x0: number, x1: number, cx: number, cy: number, y: number}} Arc */

/** A face's centre, in percent of the stage's width. @param {number} index @param {number} count */
export function faceX(index, count) {
  return ((index + 0.5) / count) * 100;
}

/**
 * The arc of one pass: a quadratic curve above the faces, higher for longer passes and for
 * repeats of the same pass, so the picture keeps every pass apart (never above the stage).
 * @param {number} from @param {number} to @param {number} count @param {number} repeat
 * @returns {Arc}
 */
export function arcGeometry(from, to, count, repeat) {
  const x0 = faceX(from, count);
  const x1 = faceX(to, count);
  const lift = Math.min(96, 40 + 0.4 * Math.abs(x1 - x0) + 12 * repeat);
  return { x0, x1, cx: (x0 + x1) / 2, cy: ARC_Y - lift, y: ARC_Y };
}

/** The point at t (0…1) along an arc. @param {Arc} g @param {number} t */
export function arcPoint(g, t) {
  const u = 1 - t;
  return {
    x: u * u * g.x0 + 2 * u * t * g.cx + t * t * g.x1,
    y: u * u * g.y + 2 * u * t * g.cy + t * t * g.y,
  };
}

/**
 * The pearl's track is as big as the stage, so translate(x%, y px) puts the pearl at (x, y).
 * @param {{x: number, y: number}} p
 */
export function at(p) {
  return `translate(${p.x.toFixed(3)}%, ${p.y.toFixed(2)}px)`;
}

/**
 * Each pass with its arc; a pass repeated between the same two faces flies higher each time.
 * @param {number[][]} passes @param {number} count @returns {Arc[]}
 */
export function arcsOf(passes, count) {
  /** @type {Map<string, number>} */
  const seen = new Map();
  return passes.map(([from, to]) => {
    const key = `${from}>${to}`;
    const repeat = seen.get(key) || 0;
    seen.set(key, repeat + 1);
    return arcGeometry(from, to, count, repeat);
  });
}
