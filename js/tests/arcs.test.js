// The round card's geometry: faces spread evenly, arcs stay apart and inside the stage.
import assert from "node:assert/strict";
import { test } from "node:test";

import { ARC_Y, arcGeometry, arcPoint, arcsOf, at, faceX } from "../arcs.js";

test("faces sit at the middle of equal slots", () => {
  assert.deepEqual(
    [0, 1, 2, 3].map((i) => faceX(i, 4)),
    [12.5, 37.5, 62.5, 87.5],
  );
  assert.equal(faceX(0, 1), 50);
});

test("an arc starts and ends on the faces it joins and bends upwards", () => {
  const g = arcGeometry(0, 2, 3, 0);
  assert.deepEqual(arcPoint(g, 0), { x: faceX(0, 3), y: ARC_Y });
  const end = arcPoint(g, 1);
  assert.ok(Math.abs(end.x - faceX(2, 3)) < 1e-9 && end.y === ARC_Y);
  assert.ok(arcPoint(g, 0.5).y < ARC_Y);
  assert.equal(g.cx, 50);
});

test("longer passes and repeats of one pass fly higher, never above the stage", () => {
  const short = arcGeometry(0, 1, 4, 0);
  const long = arcGeometry(0, 3, 4, 0);
  assert.ok(long.cy < short.cy);
  const [first, back, again] = arcsOf(
    [
      [0, 1],
      [1, 0],
      [0, 1],
    ],
    2,
  );
  assert.equal(back.cy, first.cy); // the other direction is another pass
  assert.ok(again.cy < first.cy);
  for (let repeat = 0; repeat < 20; repeat++) {
    assert.ok(arcGeometry(0, 9, 10, repeat).cy >= ARC_Y - 96);
  }
});

test("the pearl's transform moves it in percent across and pixels down", () => {
  assert.equal(at({ x: 12.5, y: 54 }), "translate(12.500%, 54.00px)");
});
