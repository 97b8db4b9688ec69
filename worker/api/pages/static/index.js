// `/`: the leaderboards there are, by system (the server embeds the list: the worker's own systems).
import {boardHref, boards, categoryName, el, systemName, wireSearch} from "./common.js";

wireSearch();
const list = document.getElementById("board-list");
for (const [system, categories] of Object.entries(boards())) {
  list.append(el("li", {}, el("strong", {text: systemName(system)}), ": ", ...categories.flatMap(
    (category, i) => [i ? ", " : "", el("a", {href: boardHref(system, category), text: categoryName(category)})])));
}
document.body.dataset.ready = "true";
