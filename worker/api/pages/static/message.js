// `/messages?source=&id=`: what became of a message (/v1/messages): its status and why, the ratings it changed,
// and whom it left out and why. The support token, when the API has one, is typed in the form, kept in this
// tab's sessionStorage only (gone when the tab closes) and sent as `Authorization: Bearer`, never in the
// address, where it would reach the history, logs and Referer headers.

import {
  ApiError, el, getJson, playerLink, ratingName, showProblem, signed, systemName, when, whole, wireSearch,
} from "./common.js";

const TOKEN = "rating-worker.support-token";
const form = document.getElementById("lookup");
const status = document.getElementById("status");

function outcome(message) {
  if (message.status === "applied") {
    const n = message.changes.length;
    return `Applied: it changed ${n} ${n === 1 ? "rating" : "ratings"}.`;
  }
  if (message.status === "unrated") return `Unrated: ${message.explanation} (${message.reason}).`;
  return "Unknown: the worker has not processed a message with this source and id (never sent, or not yet).";
}

function facts(message) {
  const pairs = [["Source", message.source], ["Id", message.id]];
  if (message.status !== "unknown") {
    pairs.push(["Type", message.type], ["Ref", message.ref ?? "–"], ["Processed", when(message.processed_at)],
               ["Duplicates", `${message.duplicates} (deliveries after the first, ignored)`]);
  }
  return pairs.flatMap(([name, value]) => [el("dt", {text: name}), el("dd", {}, value)]);
}

function rows(tbody, items, columns, none, cellsOf) {
  tbody.replaceChildren(...(items.length ? items.map((item) => el("tr", {}, ...cellsOf(item)))
    : [el("tr", {}, el("td", {colspan: columns, class: "muted", text: none}))]));
}

function show(message) {
  document.getElementById("outcome").textContent = outcome(message);
  document.getElementById("facts").replaceChildren(...facts(message));
  rows(document.querySelector("#changes tbody"), message.changes, 6, "None.", (c) => [
    el("th", {scope: "row", class: "player"}, playerLink(c.player_id)),
    el("td", {text: ratingName(c.system, c.category)}), el("td", {class: "num", text: whole(c.before.rating)}),
    el("td", {class: "num", text: whole(c.after.rating)}), el("td", {class: "num", text: signed(c.delta)}),
    el("td", {class: "num", text: String(c.version)})]);
  rows(document.querySelector("#left-out tbody"), message.left_out, 3, "Nobody.", (x) => [
    el("th", {scope: "row", class: "player"}, playerLink(x.player_id)), el("td", {text: systemName(x.system)}),
    el("td", {}, x.explanation, " ", el("span", {class: "muted", text: `(${x.reason})`}))]);
  document.getElementById("result").hidden = false;
}

// The question asked: {source, id}, or {ref} (a game, competition or puzzle id) when source and id are empty
function question(source, id, ref) {
  return source || id ? {source, id} : {ref};
}

async function lookup(asking) {
  const token = sessionStorage.getItem(TOKEN);
  status.replaceChildren("Looking it up…");
  document.getElementById("result").hidden = true;
  try {
    show(await getJson(`/v1/messages?${new URLSearchParams(asking)}`,
                       token ? {Authorization: `Bearer ${token}`} : {}));
    status.replaceChildren();
  } catch (error) {
    showProblem(status, error instanceof ApiError && error.status === 401
      ? "This API needs the support token: type it above." : error);
    if (error instanceof ApiError && error.status === 401) form.elements.token.focus();
  }
  document.body.dataset.ready = "true";
}

wireSearch();
const asked = new URLSearchParams(window.location.search);
form.elements.source.value = asked.get("source") ?? "";
form.elements.id.value = asked.get("id") ?? "";
form.elements.ref.value = asked.get("ref") ?? "";
form.elements.token.value = sessionStorage.getItem(TOKEN) ?? "";
form.addEventListener("submit", (event) => {
  event.preventDefault();
  const token = form.elements.token.value.trim();
  if (token) sessionStorage.setItem(TOKEN, token);
  else sessionStorage.removeItem(TOKEN);
  const asking = question(form.elements.source.value, form.elements.id.value, form.elements.ref.value);
  window.history.replaceState(null, "", `?${new URLSearchParams(asking)}`);
  lookup(asking);
});
if (asked.get("source") || asked.get("id") || asked.get("ref")) {
  lookup(question(asked.get("source") ?? "", asked.get("id") ?? "", asked.get("ref") ?? ""));
} else {
  document.body.dataset.ready = "true";
}
