// A bot that plays every seat its account holds over the account socket (docs/protocol.md,
// "The account channel"), written from that document alone, in plain JavaScript on Node's
// built-ins: it answers every turn line with the first of the turn's legal moves, and when the
// connection is cut it opens the socket again with the cursor of the last frame it read,
// until it has seen the given number of its matches finish.
//
//   node --experimental-websocket account_bot.mjs --url http://127.0.0.1:8080 \
//        --token "$TOKEN" --matches 2 [--cursor 0]
//
// (the token may be given as DOMINO_TOKEN instead; Node 22 and later have WebSocket without
// the flag; --cursor 0 reads the account's feed from its start, each match from its first
// event.) It prints one JSON line per line it read, in the order read — {"account": id,
// "type": ...} for the account's, {"match": id, "seat": n, "id": n, "type": ...} for a seat's
// events — and at the end a summary, {"summary": {...}}. Exit status: 0 when the matches
// finished, 1 when it stopped before, 2 for bad arguments.

import { parseArgs } from "node:util";

const PROTOCOL = "1"; // the version of the protocol this bot speaks (Domino-Protocol)
const FINAL = new Set([4001, 4002, 4003, 4004]); // the token's end: no reopening
const RETRY_MS = [50, 100, 200, 400, 800, 1600]; // waits before reopening, after failures
const GIVE_UP = 30; // handshakes failed in a row before the bot stops

const { values: args } = parseArgs({
  options: {
    url: { type: "string" },
    token: { type: "string" },
    matches: { type: "string" },
    cursor: { type: "string" },
  },
});
const base = (args.url ?? process.env.DOMINO_URL ?? "http://127.0.0.1:8080").replace(/\/$/, "");
const token = args.token ?? process.env.DOMINO_TOKEN;
const wanted = Number(args.matches ?? 1);
if (!token || !Number.isInteger(wanted) || wanted < 1) {
  console.error("usage: account_bot.mjs --url URL --token TOKEN --matches N [--cursor C]");
  process.exit(2);
}
if (typeof WebSocket !== "function") {
  console.error("this Node has no WebSocket: run it with --experimental-websocket (Node 20.10+)");
  process.exit(2);
}

const socketUrl = `${base.replace(/^http/, "ws")}/api/v1/account/socket`;
let cursor = args.cursor ?? null; // the last frame's, sent back as it came
const finished = new Set(); // matches whose match_finished was read
const ended = new Set(); // matches whose match_ended was read (a seat of it)
const counts = { frames: 0, moves: 0, reconnects: 0, handshakes_failed: 0, outcomes: {} };
let failedInRow = 0;
let done = false;
process.exitCode = 1;

function say(object) {
  process.stdout.write(`${JSON.stringify(object)}\n`);
}

function outcome(kind) {
  counts.outcomes[kind] = (counts.outcomes[kind] ?? 0) + 1;
}

function finish(code) {
  done = true;
  say({ summary: { ...counts, cursor, finished: [...finished] } });
  process.exitCode = code;
}

function address() {
  return cursor === null ? socketUrl : `${socketUrl}?cursor=${encodeURIComponent(cursor)}`;
}

function open() {
  const ws = new WebSocket(address(), {
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
    if ("cursor" in frame) {
      cursor = frame.cursor;
      counts.frames += 1;
    }
    switch (frame.type) {
      case "account":
        return onAccount(frame.line, ws);
      case "line":
        return onLine(frame.match_id, frame.seat, frame.line);
      case "accepted":
        sent.delete(frame.key);
        return outcome(frame.replayed ? "replayed" : "accepted");
      case "rejected":
        sent.delete(frame.key);
        console.error(`move ${frame.key} rejected: ${frame.reason} (${frame.rule})`);
        return outcome("rejected");
      case "limited":
      case "timeout": // send it again (after retry_after seconds), under the same key
        outcome(frame.type);
        if (sent.has(frame.key)) {
          setTimeout(() => send(sent.get(frame.key)), (frame.retry_after ?? 0) * 1000);
        }
        return;
      case "error":
        console.error(`error frame: ${frame.error}: ${frame.message}`);
        return outcome("error");
      case "closed": // the token ended: the close code (4001-4004) follows
        console.error(`closed: ${frame.reason}: ${frame.message}`);
        return;
      default: // a frame type this bot does not know: skip it
        return;
    }
  });

  function onAccount(line, socket) {
    if (line.type === "state" || line.type === "gap") {
      say({ account: null, type: line.type });
      return;
    }
    say({ account: line.id, type: line.type });
    if (line.type === "match_finished") {
      finished.add(line.match_id);
      stopIfDone(socket);
    }
  }

  function stopIfDone(socket) {
    // done once the matches finished, and each was read to its end on the seats' lines
    if (finished.size >= wanted && [...finished].every((m) => ended.has(m))) {
      finish(0);
      socket.close(1000);
    }
  }

  function onLine(matchId, seat, line) {
    if (line.type === "event") {
      say({ match: matchId, seat, id: line.id, type: line.event.type });
      if (line.event.type === "match_ended") {
        ended.add(matchId);
        stopIfDone(ws);
      }
    } else if (line.type === "turn") {
      // The key is the turn's version: fresh for each turn, and the same if this turn's line
      // comes again after a cut (its move then applied at most once).
      const frame = { type: "move", key: `v${line.id}`, match_id: matchId, seat, move: line.view.legal[0] };
      sent.set(frame.key, frame);
      counts.moves += 1;
      send(frame);
    }
  }

  ws.addEventListener("close", (event) => onEnd(event.code, event.reason));
  ws.addEventListener("error", () => setTimeout(() => onEnd(1006, "error"), 100));

  function onEnd(code, reason) {
    if (closed || done) return;
    closed = true;
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

// Why a handshake failed, when retrying will not help; null when it may: the same GET
// without the upgrade is refused alike for its token, version and cursor, and 426 past them.
async function refusal() {
  try {
    const answer = await fetch(address().replace(/^ws/, "http"), {
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
