// What every page shares: building elements, the read API's JSON, and how a rating is shown.
//
// Every value from the API reaches the page as text: `el` sets attributes with setAttribute and children
// as text nodes (Node.append of a string), never as HTML. No page uses innerHTML, so a player id such as
// "<script>" is shown as it is, whatever it holds.

export const SYSTEMS = {
  csr: "CSR", tsr: "TSR", uscf: "US Chess", fide: "FIDE", chesskite: "ChessKite", chesstempo: "Chess Tempo",
};

export function systemName(system) {
  return SYSTEMS[system] ?? system;
}

export function categoryName(category) {
  return category.charAt(0).toUpperCase() + category.slice(1);
}

export function ratingName(system, category) {
  return `${systemName(system)} ${categoryName(category)}`;
}

/** An element with attributes (`text` sets its text) and children (strings become text nodes). */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") node.textContent = String(value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

/** The pages' own links: the path's parts percent-encoded, the query built by URLSearchParams. */
export function playerHref(playerId) {
  return `/players/${encodeURIComponent(playerId)}`;
}

export function boardHref(system, category) {
  return `/leaderboards/${encodeURIComponent(system)}/${encodeURIComponent(category)}`;
}

export function messageHref(source, id) {
  return `/messages?${new URLSearchParams({source, id})}`;
}

export function playerLink(playerId) {
  return el("a", {href: playerHref(playerId), text: playerId});
}

/** A problem answered by the API (RFC 9457): its status and the sentence it gave. */
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail ?? `the API answered ${status}`);
    this.status = status;
  }
}

/** GET a /v1 route: its JSON, or an ApiError. `no-cache`: the browser revalidates by ETag each time. */
export async function getJson(url, headers = {}) {
  const answer = await fetch(url, {headers: {Accept: "application/json", ...headers}, cache: "no-cache"});
  const body = await answer.json().catch(() => null);
  if (!answer.ok) throw new ApiError(answer.status, body);
  return body;
}

/** The items of every page of a paged route (following `next`). */
export async function everyPage(url) {
  const items = [];
  let cursor = null;
  do {
    const page = await getJson(cursor === null ? url : `${url}&cursor=${encodeURIComponent(cursor)}`);
    items.push(...page.items);
    cursor = page.next;
  } while (cursor !== null);
  return items;
}

/** The boards there are (system -> categories), as the server embeds them in the page. */
export function boards() {
  return JSON.parse(document.getElementById("boards").textContent);
}

// Numbers and times as the pages show them: ratings in whole points (as published), changes to a tenth,
// times in UTC to the minute (the same on every reader's screen).

export function whole(x) {
  return x === null || x === undefined ? "–" : String(Math.round(x));
}

export function signed(x) {
  return x === null || x === undefined ? "–" : (x > 0 ? "+" : "") + x.toFixed(1);
}

export function when(iso) {
  return iso ? el("time", {datetime: iso, text: `${iso.slice(0, 10)} ${iso.slice(11, 16)}`}) : "–";
}

/** A rating as the Account tab shows it: whole points, "?" while provisional; US Chess marks a provisional
 * rating with P and the games it is based on (1420P12); a FIDE player off the list is "unlisted". */
export function shownRating(rating) {
  if (rating.rating === null) return el("span", {class: "shown", text: "unlisted"});
  const shown = el("span", {class: "shown"}, whole(rating.rating));
  if (rating.provisional && rating.system === "uscf") {
    shown.append(el("abbr", {title: `provisional: based on ${rating.games} games`, text: `P${rating.games}`}));
  } else if (rating.provisional) {
    shown.append(el("abbr", {title: "provisional", text: "?"}));
  }
  return shown;
}

/** What went wrong, in `where`: a sentence, the API's problem, or why the API could not be reached. */
export function showProblem(where, error) {
  const text = typeof error === "string" ? error : error instanceof ApiError
    ? `${error.message} (HTTP ${error.status})` : `The read API could not be reached: ${error.message}`;
  where.replaceChildren(el("p", {class: "problem", role: "alert", text}));
}

/** The header's "player id" form: to that player's page. */
export function wireSearch() {
  const form = document.getElementById("find-player");
  form?.addEventListener("submit", (event) => {
    event.preventDefault();
    const id = new FormData(form).get("player").trim();
    if (id) window.location.assign(playerHref(id));
  });
}
