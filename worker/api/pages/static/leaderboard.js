// `/leaderboards/{system}/{category}`: a page of the board (/v1/leaderboards/{system}/{category}), each player
// linked, paged by the API's cursor (kept in this page's address: ?cursor=, with limit and active_days). It
// asks again every few seconds and redraws the table in place when the answer changed, marking the rows
// that moved: ratings change under it as games are rated, and the page is never reloaded. "Pause updates"
// stops that (content that changes by itself must be able to be stopped).

import {
  boardHref, boards, categoryName, el, getJson, playerLink, ratingName, showProblem, when, whole, wireSearch,
} from "./common.js";

const POLL_MS = 5000;
const LIMIT = 50;

const [system, category] = window.location.pathname.split("/").slice(2).map(decodeURIComponent);
const asked = new URLSearchParams(window.location.search);
const kept = new URLSearchParams({limit: asked.get("limit") ?? String(LIMIT)});
if (asked.has("active_days")) kept.set("active_days", asked.get("active_days"));
const here = new URLSearchParams(kept);
if (asked.has("cursor")) here.set("cursor", asked.get("cursor"));
const api = `/v1/leaderboards/${encodeURIComponent(system)}/${encodeURIComponent(category)}?${here}`;

let last = null; // the answer shown, as text: redraw only when it changed
let ratings = null; // player -> rating shown, to mark who moved
let paused = false;

function navigation() {
  const nav = document.getElementById("categories");
  nav.append(el("a", {href: "/", text: "All leaderboards"}));
  for (const other of boards()[system] ?? []) {
    nav.append(el("a", {href: boardHref(system, other), text: categoryName(other),
                        "aria-current": other === category ? "page" : null}));
  }
}

function row(entry, moved) {
  return el("tr", {class: moved ? "moved" : null, "data-player": entry.player_id},
    el("td", {class: "num rank", text: String(entry.rank)}),
    el("th", {scope: "row", class: "player"}, playerLink(entry.player_id)),
    el("td", {class: "num rating", "data-value": entry.rating, text: whole(entry.rating)}),
    el("td", {class: "num rd", text: entry.rd === null ? "–" : `±${whole(entry.rd)}`}),
    el("td", {class: "num games", text: String(entry.games)}),
    el("td", {class: "last"}, when(entry.last_played_at)));
}

function render(board) {
  const items = board.items;
  const before = ratings;
  ratings = new Map(items.map((e) => [e.player_id, e.rating]));
  document.querySelector("#board tbody").replaceChildren(...items.map(
    (e) => row(e, before !== null && before.get(e.player_id) !== e.rating)));
  document.getElementById("caption").textContent = items.length
    ? `${ratingName(system, category)}: ranks ${items[0].rank} to ${items.at(-1).rank}`
    : `Nobody is on the ${ratingName(system, category)} leaderboard yet.`;
  const pages = document.getElementById("pages");
  pages.replaceChildren();
  if (asked.has("cursor")) pages.append(el("a", {href: `?${kept}`, text: "First page"}));
  if (board.next !== null) {
    pages.append(el("a", {href: `?${new URLSearchParams({...Object.fromEntries(kept), cursor: board.next})}`,
                          rel: "next", text: "Next page"}));
  }
}

async function poll() {
  const status = document.getElementById("status");
  if (!paused && !document.hidden) {
    try {
      const board = await getJson(api);
      const text = JSON.stringify(board);
      if (text !== last) render(board);
      last = text;
      status.replaceChildren();
      document.getElementById("updated").textContent = `Updated ${new Date().toISOString().slice(11, 19)} UTC`;
    } catch (error) {
      showProblem(status, error);
    }
    document.body.dataset.ready = "true";
  }
  window.setTimeout(poll, POLL_MS);
}

wireSearch();
document.getElementById("title").textContent = `${ratingName(system, category)} leaderboard`;
document.title = `${ratingName(system, category)} leaderboard · rating-worker`;
navigation();
const pause = document.getElementById("pause");
pause.addEventListener("click", () => {
  paused = !paused;
  pause.setAttribute("aria-pressed", String(paused));
});
poll();
