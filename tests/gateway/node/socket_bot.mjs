// A bot that plays one seat of a hosted match over the seat's socket (docs/protocol.md,
// "Socket"), written from that document alone, in plain JavaScript on Node's built-ins: it
// answers every turn line with the first of the turn's legal moves, and when the connection
// is cut it opens the socket again after the last id it read, until the match is over.
//
//   node --experimental-websocket socket_bot.mjs --url http://127.0.0.1:8080 \
//        --match m-9983e46a00 --seat 1 --token "$TOKEN"
//
// (each option may be given as DOMINO_URL, DOMINO_MATCH, DOMINO_SEAT, DOMINO_TOKEN instead;
// Node 22 and later have WebSocket without the flag.) It prints one JSON line per event line
// it read, {"id": N, "type": <the event's type>}, in the order read, and at the end a summary,
// {"summary": {...}}. Exit status: 0 when the match ended (the socket closed 1000 after
// match_ended), 1 when it did not, 2 for bad arguments.

import { parseArgs } from "node:util";

const PROTOCOL = "1"; // the version of the protocol this bot speaks (Domino-Protocol)
const FINAL = new Set([4001, 4002, 4003, 4004, 4005]); // the credential's end: no reopening
const RETRY_MS = [50, 100, 200, 400, 800, 1600]; // waits before reopening, after failures
const GIVE_UP = 30; // handshakes failed in a row before the bot stops
const RETRIED = new Set(["unavailable", "internal"]); // error frames whose move is sent again

const { values: args } = parseArgs({
  options: {
    url: { type: "string" },
    match: { type: "string" },
    seat: { type: "string" },
    token: { type: "string" },
    after: { type: "string" },
  },
});
const base = (args.url ?? process.env.DOMINO_URL ?? "http://127.0.0.1:8080").replace(/\/$/, "");
const matchId = args.match ?? process.env.DOMINO_MATCH;
const seat = Number(args.seat ?? process.env.DOMINO_SEAT);
const token = args.token ?? process.env.DOMINO_TOKEN;
if (!matchId || !Number.isInteger(seat) || !token) {
  console.error("usage: socket_bot.mjs --url URL --match MATCH_ID --seat SEAT --token TOKEN");
  process.exit(2);
}
if (typeof WebSocket !== "function") {
  console.error("this Node has no WebSocket: run it with --experimental-websocket (Node 20.10+)");
  process.exit(2);
}

const socketUrl = `${base.replace(/^http/, "ws")}/api/v1/matches/${encodeURIComponent(matchId)}/seats/${seat}/socket`;
let lastId = Number(args.after ?? 0); // after=0: the whole match as the seat saw it, from event 1
const counts = { events: 0, moves: 0, reconnects: 0, handshakes_failed: 0, outcomes: {} };
let ended = false; // a match_ended event was read
let failedInRow = 0;
process.exitCode = 1; // until the match is seen to end: a bot that stops for any other reason failed

function say(object) {
  process.stdout.write(`${JSON.stringify(object)}\n`);
}

function outcome(kind) {
  counts.outcomes[kind] = (counts.outcomes[kind] ?? 0) + 1;
}

function finish(code) {
  say({ summary: { ...counts, last_id: lastId, ended } });
  process.exitCode = code;
}

function open() {
  // The token goes in the handshake's Authorization header (Node's WebSocket, undici, takes
  // headers as an option; a browser's cannot, and would send a hello frame first instead).
  const ws = new WebSocket(`${socketUrl}?after=${lastId}`, {
    headers: { Authorization: `Bearer ${token}`, "Domino-Protocol": PROTOCOL },
  });
  let opened = false;
  let closed = false;
  const sent = new Map(); // key -> the move frame sent under it, until its outcome comes

  function send(frame) {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(frame));
  }

  ws.addEventListener("open", () => {
    opened = true;
    failedInRow = 0;
  });

  ws.addEventListener("message", (message) => {
    const frame = JSON.parse(message.data);
    switch (frame.type) {
      case "line":
        return onLine(frame.line);
      case "accepted":
        sent.delete(frame.key);
        return outcome(frame.replayed ? "replayed" : "accepted");
      case "rejected":
        sent.delete(frame.key);
        console.error(`move ${frame.key} rejected: ${frame.reason} (${frame.rule}): ${frame.message}`);
        return outcome("rejected");
      case "limited": // send it again after retry_after seconds, under the same key
        outcome("limited");
        if (sent.has(frame.key)) {
          setTimeout(() => send(sent.get(frame.key)), frame.retry_after * 1000);
        }
        return;
      case "timeout": // no answer in time: send it again with the same key
        outcome("timeout");
        if (sent.has(frame.key)) send(sent.get(frame.key));
        return;
      case "error": // the store unavailable, or the gateway failed on it: send it again
        console.error(`error frame: ${frame.error}: ${frame.message}`);
        outcome("error");
        if (RETRIED.has(frame.error) && sent.has(frame.key)) {
          setTimeout(() => send(sent.get(frame.key)), 200);
        }
        return;
      case "closed": // the token ended: the close code (4001-4005) follows
        console.error(`closed: ${frame.reason}: ${frame.message}`);
        return;
      default: // a frame type this bot does not know: skip it
        return;
    }
  });

  function onLine(line) {
    lastId = Math.max(lastId, line.id);
    if (line.type === "event") {
      counts.events += 1;
      say({ id: line.id, type: line.event.type });
      if (line.event.type === "match_ended") ended = true;
    } else if (line.type === "gap") {
      console.error(`gap: events ${line.after + 1} to ${line.oldest - 1} are lost`);
      say({ gap: { after: line.after, oldest: line.oldest } });
    } else if (line.type === "turn") {
      // The key is the turn's version: fresh for each turn, and the same if this turn's line
      // comes again after a cut (its move then applied at most once).
      const frame = { type: "move", key: `v${line.id}`, move: line.view.legal[0] };
      sent.set(frame.key, frame);
      counts.moves += 1;
      send(frame);
    }
  }

  // A cut shows as an error event, then a close event (1006); a failed handshake, in Node 20's
  // WebSocket, as an error event alone. Either is acted on once: the close, or the error when
  // no close follows it.
  ws.addEventListener("close", (event) => onEnd(event.code, event.reason));
  ws.addEventListener("error", () => setTimeout(() => onEnd(1006, "error"), 100));

  function onEnd(code, reason) {
    if (closed) return;
    closed = true;
    if (code === 1000) return finish(ended ? 0 : 1);
    if (FINAL.has(code) || (code >= 4400 && code < 4600)) {
      console.error(`socket closed ${code} ${reason}: not reopened`);
      return finish(1);
    }
    if (opened) {
      counts.reconnects += 1;
      return open();
    }
    counts.handshakes_failed += 1;
    failedInRow += 1;
    refusal().then((why) => {
      if (why !== null) {
        console.error(`the socket is refused: ${why}`);
        return finish(1);
      }
      if (failedInRow >= GIVE_UP) {
        console.error(`the socket could not be opened ${GIVE_UP} times in a row: giving up`);
        return finish(1);
      }
      counts.reconnects += 1;
      setTimeout(open, RETRY_MS[Math.min(failedInRow, RETRY_MS.length) - 1]);
    });
  }
}

// Why a handshake failed, when retrying will not help; null when it may. A WebSocket client
// is shown neither the status nor the body of a refused handshake (it sees a close 1006, as
// for a cut), but the same GET without the upgrade is refused alike for its token, version
// and resume point, and answered 426 past them.
async function refusal() {
  try {
    const answer = await fetch(`${socketUrl.replace(/^ws/, "http")}?after=${lastId}`, {
      headers: { Authorization: `Bearer ${token}`, "Domino-Protocol": PROTOCOL },
    });
    const body = await answer.text();
    if (answer.status === 426 || answer.status === 429 || answer.status >= 500) return null;
    return `${answer.status} ${body}`;
  } catch {
    return null; // unreachable: the gateway may be restarting
  }
}

open();
