// Where each played tile of a round lies on the table, folded from its tile_played events.
//
// Units: a tile's half is 1x1. The lead lies at the origin; the left arm grows to the left and
// the right arm to the right along y = 0; in Straight the spinner's up and down arms grow
// vertically from it. A tile on an end whose open number is n shows n inward (towards the
// lead); doubles lie crosswise.

const AXIS = { left: [-1, 0], right: [1, 0], up: [0, -1], down: [0, 1] };

/** The tile_played events of the round in progress (or just ended), in order. */
export function roundPlays(events) {
  let plays = [];
  for (const item of events) {
    const e = item.event;
    if (!e) continue;
    if (e.type === "round_started") plays = [];
    else if (e.type === "tile_played") plays.push({ version: item.id, seat: e.seat, tile: e.tile, end: e.end });
  }
  return plays;
}

/**
 * Place each play: [{tile, end, halves, vertical, x, y, w, h, cross, spinner}] in play order,
 * with the bounding box. `spinners`: whether the first double becomes the spinner (Straight).
 */
export function layOut(plays, spinners) {
  const arms = {};
  const out = [];
  let spinner = null;

  const openSpinner = (cx) => {
    arms.up = { pos: -1, axis: cx, num: spinner.tile[0] };
    arms.down = { pos: 1, axis: cx, num: spinner.tile[0] };
  };

  for (const p of plays) {
    const [a, b] = p.tile;
    const double = a === b;
    if (p.end === null || !arms.left) {
      // the lead (or, with events missing, the first tile we know of)
      const piece = double
        ? { x: -0.5, y: -1, w: 1, h: 2, vertical: true, halves: [a, b] }
        : { x: -1, y: -0.5, w: 2, h: 1, vertical: false, halves: [a, b] };
      arms.left = { pos: piece.x, axis: 0, num: a };
      arms.right = { pos: piece.x + piece.w, axis: 0, num: b };
      const placed = { ...p, end: "lead", ...piece, cross: double, spinner: false };
      if (spinners && double) {
        spinner = placed;
        placed.spinner = true;
        openSpinner(0);
      }
      out.push(placed);
      continue;
    }
    const arm = arms[p.end];
    if (!arm) continue; // an end we know nothing of: cannot happen with the whole round
    const n = arm.num === a || arm.num === b ? arm.num : a;
    const other = a === n ? b : a;
    const [dx, dy] = AXIS[p.end];
    let piece;
    if (dy === 0) {
      // along the long arms
      if (double) piece = { w: 1, h: 2, y: arm.axis - 1, vertical: true, halves: [n, n] };
      else piece = { w: 2, h: 1, y: arm.axis - 0.5, vertical: false, halves: dx < 0 ? [other, n] : [n, other] };
      piece.x = dx < 0 ? arm.pos - piece.w : arm.pos;
      arm.pos = dx < 0 ? piece.x : piece.x + piece.w;
    } else {
      // up and down from the spinner
      if (double) piece = { w: 2, h: 1, x: arm.axis - 1, vertical: false, halves: [n, n] };
      else piece = { w: 1, h: 2, x: arm.axis - 0.5, vertical: true, halves: dy < 0 ? [other, n] : [n, other] };
      piece.y = dy < 0 ? arm.pos - piece.h : arm.pos;
      arm.pos = dy < 0 ? piece.y : piece.y + piece.h;
    }
    arm.num = other;
    const placed = { ...p, ...piece, cross: double, spinner: false };
    if (spinners && double && !spinner) {
      spinner = placed;
      placed.spinner = true;
      openSpinner(piece.x + piece.w / 2);
    }
    out.push(placed);
  }

  let minX = 0, minY = 0, maxX = 0, maxY = 0;
  for (const t of out) {
    minX = Math.min(minX, t.x);
    minY = Math.min(minY, t.y);
    maxX = Math.max(maxX, t.x + t.w);
    maxY = Math.max(maxY, t.y + t.h);
  }
  return { tiles: out, box: { minX, minY, maxX, maxY } };
}
