// The web board of `git loop serve`. Everything a task holds (titles, notes, output) is written
// as text (textContent), never as markup: nothing an agent wrote runs here.
"use strict";

const KEY = "git-loop-token";
let token = null;
let following = null;
// The tasks whose ways to answer are shown: kept open across redraws.
const opened = new Set();
// The tasks seen waiting for a person (null before the first board): one that joins them is told.
let waitingSeen = null;

// A task newly waiting for a person: said on the page, and as a browser notification when the
// person allowed them (the same moments a walk tells loop.notify of).
function tell(board) {
  const now = new Map();
  for (const column of board.columns) {
    if (column.name !== "needs you" && column.name !== "failed") continue;
    for (const c of column.cards) now.set(c.id, c);
  }
  if (waitingSeen !== null) {
    for (const [id, c] of now) {
      if (waitingSeen.has(id)) continue;
      const wait = board.waiting && board.waiting[id];
      const reason = wait && wait.reason ? wait.reason : "";
      say(id + " needs you: " + c.title + (reason ? " (" + reason + ")" : ""));
      if ("Notification" in window && Notification.permission === "granted") {
        new Notification(id + " needs you", { body: c.title + (reason ? "\n" + reason : ""), tag: id });
      }
    }
  }
  waitingSeen = new Set(now.keys());
}

// The token comes in the address's fragment (never sent to a server), is kept for this tab,
// and is taken out of the address bar.
function takeToken() {
  const match = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem(KEY, decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname);
  }
  token = sessionStorage.getItem(KEY);
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function say(text) {
  document.getElementById("message").textContent = text || "";
}

function connection(text) {
  document.getElementById("connection").textContent = text;
}

function api(path, options) {
  const headers = Object.assign({ Authorization: "Bearer " + token }, (options && options.headers) || {});
  return fetch("/api/" + path, Object.assign({}, options, { headers, cache: "no-store" }));
}

// The actions a card offers, by its column.
const ACTIONS = {
  "ready": ["park"],
  "running": ["stop", "reassign", "take-over"],
  "needs you": ["reopen", "reassign", "take-over", "hand-back", "park"],
  "done": ["reopen"],
  "parked": ["reopen"],
  "failed": ["reopen", "reassign", "park"],
};
const LABELS = {
  "stop": "Stop", "reassign": "Reassign", "take-over": "Take over", "hand-back": "Hand back",
  "reopen": "Reopen", "park": "Park",
};

async function act(id, verb) {
  const body = {};
  if (verb === "stop" && !confirm("Stop " + id + "'s session?")) return;
  if (verb === "take-over" && !confirm("Take " + id + " over? The loop leaves it to you until you hand it back.")) return;
  if (verb === "park") {
    const reason = prompt("Why park " + id + "?");
    if (!reason) return;
    body.reason = reason;
  }
  if (verb === "reassign") {
    const agent = prompt("Reassign " + id + " to which agent?");
    if (!agent) return;
    body.agent = agent;
  }
  if (verb === "hand-back") {
    body.keep = confirm("Keep your work as it is (OK), or let its agent go on (Cancel)?");
  }
  say(LABELS[verb] + " " + id + "…");
  try {
    const response = await api("tasks/" + encodeURIComponent(id) + "/" + verb, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    const answer = await response.json();
    if (response.ok) {
      say((answer.lines || []).join(" · "));
    } else {
      say(answer.error + (answer.hint ? " (" + answer.hint + ")" : ""));
    }
  } catch (err) {
    say("the server did not answer: " + err);
  }
}

// The button that opens a task's session output (`where` keeps its focus apart from its twin's).
function outputButton(id, where) {
  const button = el("button", "Output");
  button.type = "button";
  button.dataset.key = id + " " + where;
  button.setAttribute("aria-label", "Output of " + id);
  button.addEventListener("click", () => follow(id));
  return button;
}

function card(column, c, waiting) {
  const item = el("li", null, "card");
  item.dataset.task = c.id;
  item.appendChild(el("div", c.id, "id"));
  item.appendChild(el("div", c.title, "title"));
  if (c.note) item.appendChild(el("div", c.note, "note"));
  // A task waiting for a person: why, and every way to answer it.
  const wait = waiting && waiting[c.id];
  if (wait) {
    if (wait.reason) item.appendChild(el("div", wait.reason, "reason"));
    if (wait.answers && wait.answers.length) {
      const details = el("details", null, "answers");
      details.open = opened.has(c.id);
      details.addEventListener("toggle", () => (details.open ? opened.add(c.id) : opened.delete(c.id)));
      details.appendChild(el("summary", "How to answer"));
      const list = el("ul");
      for (const a of wait.answers) {
        const line = el("li");
        line.appendChild(el("code", a.command));
        line.appendChild(document.createTextNode(" " + a.does));
        list.appendChild(line);
      }
      details.appendChild(list);
      item.appendChild(details);
    }
  }
  const actions = el("div", null, "actions");
  for (const verb of ACTIONS[column] || []) {
    const button = el("button", LABELS[verb]);
    button.type = "button";
    button.dataset.verb = verb;
    button.dataset.key = c.id + " " + verb;
    button.setAttribute("aria-label", LABELS[verb] + " " + c.id);
    button.addEventListener("click", () => act(c.id, verb));
    actions.appendChild(button);
  }
  if (column === "running") actions.appendChild(outputButton(c.id, "output"));
  item.appendChild(actions);
  return item;
}

function render(board) {
  if (board.error) {
    say("the board could not be read: " + board.error);
    return;
  }
  tell(board);
  // The board is drawn anew: the focus goes back to the same button, for keyboards.
  const active = document.activeElement;
  const focused = active && active.dataset ? active.dataset.key : null;
  draw(board);
  if (focused) {
    const again = Array.from(document.querySelectorAll("[data-key]")).find((b) => b.dataset.key === focused);
    if (again) again.focus();
  }
}

function draw(board) {
  const header = document.getElementById("header");
  header.replaceChildren(...(board.header || []).map((line) => el("p", line)));
  const main = document.getElementById("board");
  main.replaceChildren(...board.columns.map((column) => {
    const section = el("section", null, "column");
    section.setAttribute("aria-label", column.name);
    const count = column.cards.length + column.more;
    section.appendChild(el("h2", column.name + " (" + count + ")"));
    const list = el("ul");
    list.replaceChildren(...column.cards.map((c) => card(column.name, c, board.waiting)));
    section.appendChild(list);
    if (column.more > 0) section.appendChild(el("p", "… and " + column.more + " more", "note"));
    return section;
  }));
  const rows = (board.sessions || []).map((s) => {
    const row = el("tr");
    for (const value of [s.task, s.agent, s.try_number, s.elapsed, s.spent, s.last]) row.appendChild(el("td", value));
    const cell = el("td");
    cell.appendChild(outputButton(s.task, "session-output"));
    row.appendChild(cell);
    return row;
  });
  document.querySelector("#sessions tbody").replaceChildren(...rows);
  const landing = board.landing;
  const queue = landing ? landing.queue || [] : [];
  document.getElementById("landing-title").textContent =
    landing ? "Landing queue on " + landing.into + " (" + queue.length + ")" : "Landing queue";
  document.getElementById("landing").replaceChildren(...queue.map((q) => {
    const waits = q.waiting_for && q.waiting_for.length ? " (after " + q.waiting_for.join(", ") + ")" : "";
    return el("li", q.task + " " + q.priority + " " + q.title + waits);
  }));
  document.getElementById("journal").replaceChildren(...(board.journal || []).slice().reverse().map((l) => el("li", l)));
  if (following) showOutput(following);
}

async function showOutput(id) {
  try {
    const response = await api("tasks/" + encodeURIComponent(id) + "/output");
    const output = await response.json();
    const title = output.session
      ? id + " · session " + output.session + " (" + output.agent + ", try " + output["try"] + ")" + (output.running ? "" : " · ended")
      : id + " · no session of it ran on this machine";
    document.getElementById("output-title").textContent = title;
    const pre = document.getElementById("output");
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.textContent = (output.lines || []).join("\n");
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  } catch (err) {
    say("the output could not be read: " + err);
  }
}

function follow(id) {
  following = id;
  document.getElementById("output-pane").hidden = false;
  showOutput(id);
  document.getElementById("output").focus();
}

// Server-sent events over fetch (an EventSource cannot send the token in a header).
async function listen() {
  for (;;) {
    try {
      const response = await api("events");
      if (response.status === 401) {
        sessionStorage.removeItem(KEY);
        token = null;
        connection("the token was refused");
        login();
        return;
      }
      if (!response.ok || !response.body) throw new Error("status " + response.status);
      connection("live");
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let name = "message";
          let data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("event: ")) name = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
          }
          if (name === "board" && data) render(JSON.parse(data));
        }
      }
    } catch (err) {
      // Said below; tried again.
    }
    connection("reconnecting…");
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

function login() {
  const form = document.getElementById("login");
  form.hidden = false;
  document.getElementById("token").focus();
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("login").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = document.getElementById("token").value.trim();
    if (!value) return;
    sessionStorage.setItem(KEY, value);
    token = value;
    document.getElementById("login").hidden = true;
    listen();
  });
  const notify = document.getElementById("notify");
  if ("Notification" in window && Notification.permission !== "granted") {
    notify.hidden = false;
    notify.addEventListener("click", async () => {
      const answer = await Notification.requestPermission();
      notify.hidden = answer === "granted";
      say(answer === "granted" ? "you will be told when a task needs you" : "notifications were not allowed");
    });
  }
  document.getElementById("output-close").addEventListener("click", () => {
    following = null;
    document.getElementById("output-pane").hidden = true;
  });
  takeToken();
  if (!token) {
    connection("no token");
    login();
    return;
  }
  listen();
});
