// Readable text for events, sides and results.

import { tileText } from "./tiles.js";

const FAMILY = { express: "Express", straight: "Straight" };

export const familyName = (f) => FAMILY[f] || f || "?";

/** Names by seat, or "seat k" where unknown. */
export function seatName(players, seat) {
  return players?.[seat] ?? `seat ${seat}`;
}

/** Who a side is: the player, or both partners (seats s and s+2). */
export function sideName(rules, players, side) {
  if (rules?.partners) return `${seatName(players, side)} & ${seatName(players, side + 2)}`;
  return seatName(players, side);
}

export function sidesOf(rules) {
  if (!rules) return 0;
  return rules.partners ? 2 : rules.players;
}

export function rulesText(rules) {
  if (!rules) return "";
  const parts = [familyName(rules.family), `${rules.players} players`];
  if (rules.partners) parts.push("partners");
  if (rules.top && rules.top !== 6) parts.push(`double-${rules.top}`);
  parts.push(`to ${rules.target}`);
  return parts.join(" · ");
}

const END_WORD = { left: "the left", right: "the right", up: "the top", down: "the bottom" };

const OUTCOME = {
  domino: "dominoed",
  blocked: "blocked",
  target: "reached the target",
  resigned: "resigned",
  forfeit: "forfeited",
  aborted: "aborted",
  cancelled: "cancelled",
};

const REASON = {
  target: "reached the target",
  resigned: "resignation",
  forfeit: "forfeit",
  rounds: "last round played",
  aborted: "aborted",
  cancelled: "cancelled",
};

export const reasonText = (r) => REASON[r] || r || "";

/** One event as a sentence. `ctx` = {players, rules}. */
export function describe(event, ctx) {
  const who = (seat) => seatName(ctx.players, seat);
  switch (event.type) {
    case "match_created":
      return `Match created: ${rulesText(event.rules)}.`;
    case "round_started": {
      let text = `Round ${event.round} dealt; ${who(event.leader)} leads`;
      if (event.forced_lead) text += ` with ${tileText(event.forced_lead)}`;
      return `${text}. ${event.stock_size} in the stock.`;
    }
    case "tile_played": {
      const t = tileText(event.tile);
      let text = event.end === null ? `${who(event.seat)} led ${t}` : `${who(event.seat)} played ${t} on ${END_WORD[event.end] || event.end}`;
      if (event.points) text += `, scoring ${event.points}`;
      return `${text}.`;
    }
    case "tile_drawn":
      return event.tile ? `${who(event.seat)} drew ${tileText(event.tile)}.` : `${who(event.seat)} drew a tile.`;
    case "turn_passed":
      return `${who(event.seat)} passed.`;
    case "turn_timed_out":
      return `${who(event.seat)} ran out of time.`;
    case "round_ended": {
      let text = `Round ${event.round} over`;
      if (event.outcome === "domino" && event.winner !== null) text += `: ${who(event.winner)} dominoed`;
      else if (event.outcome === "blocked") text += ": blocked";
      else text += ` (${OUTCOME[event.outcome] || event.outcome})`;
      if (event.side !== null && event.side !== undefined && event.points) {
        text += `; ${sideName(ctx.rules, ctx.players, event.side)} score ${event.points}`;
      }
      return `${text}. Scores ${event.scores.join("–")}.`;
    }
    case "match_ended":
      return `${resultText(event, ctx)}`;
    default:
      return `${event.type}`;
  }
}

/** "Alice won 100–45 (reached the target)" or "Match aborted: no winner". */
export function resultText(result, ctx) {
  const score = (result.scores || []).join("–");
  if (result.winner === null || result.winner === undefined) {
    return `Match ${result.reason || "over"}: no winner (${score}).`;
  }
  const winners = sideName(ctx.rules, ctx.players, result.winner);
  const scores = result.scores || [];
  const others = scores.filter((_, s) => s !== result.winner);
  return `${winners} won ${[scores[result.winner], ...others].join("–")} (${reasonText(result.reason)}).`;
}

/** S4: the all-fives count of the open ends, from the view's ends. */
export function endsCount(view) {
  const ends = view?.ends || [];
  if (!ends.length) return 0;
  if ((view.played || []).length === 1) {
    const t = view.played[0];
    return t[0] + t[1];
  }
  let total = 0;
  for (const e of ends) {
    if ((e.end === "up" || e.end === "down") && !e.tiles) continue;
    total += e.double ? 2 * e.number : e.number;
  }
  return total;
}
