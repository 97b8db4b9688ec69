// `/players/{player_id}`: every rating as the Account tab shows it (/v1/players/{id}), a chart of each rating's
// history (/v1/players/{id}/history/{system}/{category}, every page), the latest changes with their causes,
// and the messages that changed none of the ratings, with the reason in a sentence (/v1/players/{id}/unrated).

import {drawChart} from "./chart.js";
import {
  boardHref, el, everyPage, getJson, messageHref, ratingName, shownRating, showProblem, signed, systemName,
  when, whole, wireSearch,
} from "./common.js";

const CHANGES_SHOWN = 20;
const HISTORY_PAGE = 1000; // the most a history page holds: the fewest requests for a long history

/** The charts drawn, by "system/category" (uPlot instances: for the tests, and the console). */
window.ratingCharts = new Map();

function cells(...tds) {
  return tds.map(([value, attributes = {}]) => el("td", attributes, value));
}

function noRows(tbody, columns, text) {
  tbody.replaceChildren(el("tr", {}, el("td", {colspan: columns, class: "muted", text})));
}

function showRatings(ratings) {
  const tbody = document.querySelector("#ratings tbody");
  tbody.replaceChildren(...ratings.map((r) => {
    const shown = el("span", {}, shownRating(r));
    if (r.start) shown.append(el("span", {class: "badge start", text: "start"}));
    if (r.inactive) shown.append(el("span", {class: "badge inactive", text: "inactive"}));
    const rank = r.rank === null ? "–" : el("a", {href: boardHref(r.system, r.category), text: String(r.rank),
                                                  "aria-label": `rank ${r.rank} on the leaderboard`});
    return el("tr", {"data-rating": `${r.system}/${r.category}`},
      el("th", {scope: "row", text: ratingName(r.system, r.category)}),
      cells([shown, {class: "num rating", "data-value": r.rating ?? ""}],
            [r.rd === null ? "–" : `±${whole(r.rd)}`, {class: "num rd"}],
            [whole(r.floor), {class: "num floor"}], [String(r.games), {class: "num games"}],
            [rank, {class: "num rank"}], [r.percentile === null ? "–" : `${r.percentile}%`, {class: "num percentile"}],
            [when(r.last_played_at), {class: "last"}]));
  }));
}

function causeOf(change) {
  const cause = change.cause;
  return [`${cause.type} `, el("a", {href: messageHref(cause.source, cause.id), text: cause.ref ?? cause.id})];
}

function showChanges(changes) {
  const tbody = document.querySelector("#changes tbody");
  const latest = [...changes].sort((a, b) => (b.changed_at < a.changed_at ? -1 : b.changed_at > a.changed_at ? 1
    : b.version - a.version)).slice(0, CHANGES_SHOWN);
  if (!latest.length) return noRows(tbody, 6, "None yet.");
  tbody.replaceChildren(...latest.map((c) => el("tr", {},
    cells([when(c.changed_at)], [ratingName(c.system, c.category)], [whole(c.before.rating), {class: "num"}],
          [whole(c.after.rating), {class: "num"}], [signed(c.delta), {class: "num"}], [causeOf(c)]))));
}

function showUnrated(items) {
  const tbody = document.querySelector("#unrated tbody");
  if (!items.length) return noRows(tbody, 4, "None.");
  tbody.replaceChildren(...items.map((u) => el("tr", {},
    cells([when(u.message_at)], [[`${u.type} `, el("a", {href: messageHref(u.source, u.id), text: u.ref ?? u.id})]],
          [systemName(u.system)], [[u.explanation, " ", el("span", {class: "muted", text: `(${u.reason})`})]]))));
}

function showClosed(player) {
  if (!player.closed) return;
  document.getElementById("closed").replaceChildren(el("p", {class: "problem"},
    el("span", {class: "badge closed", text: "closed"}), " Closed for fair play on ", when(player.closed_at),
    ": the ratings are frozen, and the account is on no leaderboard."));
}

async function main() {
  wireSearch();
  const status = document.getElementById("status");
  let playerId;
  try {
    playerId = decodeURIComponent(window.location.pathname.slice("/players/".length));
  } catch (error) {
    showProblem(status, `The address holds no player id (${error.message}).`);
    return;
  }
  document.getElementById("title").textContent = playerId;
  document.title = `${playerId} · rating-worker`;
  const base = `/v1/players/${encodeURIComponent(playerId)}`;
  try {
    const player = await getJson(base);
    showClosed(player);
    showRatings(player.ratings);
    const played = player.ratings.filter((r) => r.version > 0);
    const [histories, unrated] = await Promise.all([
      Promise.all(played.map((r) => everyPage(`${base}/history/${r.system}/${r.category}?limit=${HISTORY_PAGE}`))),
      getJson(`${base}/unrated`),
    ]);
    const charts = document.getElementById("charts");
    played.forEach((r, i) => {
      const u = drawChart(charts, ratingName(r.system, r.category), histories[i]);
      if (u) window.ratingCharts.set(`${r.system}/${r.category}`, u);
    });
    if (!played.length) charts.append(el("p", {class: "muted", text: "No rating has changed yet."}));
    showChanges(histories.flat());
    showUnrated(unrated.items);
    status.textContent = "";
  } catch (error) {
    showProblem(status, error);
  }
  document.body.dataset.ready = "true";
}

main();
