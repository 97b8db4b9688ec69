// One rating's history as a chart, drawn by uPlot (static/vendor/, its built file from npm): the rating as a
// step at each change (it holds from one change to the next), its band of ± 2 RD where the system has an RD
// (the 95 % interval, as `rating-worker player --plot` draws it), the floor as a dashed step where the system
// has one, and the peak (the highest rating reached, its first time) as a dot. Times in UTC, as the tables.
// Zoom: drag across the plot, or the buttons for the keyboard; a double-click or "Show all" goes back.

import {el, whole} from "./common.js";

export const BAND_RDS = 2;
const HEIGHT = 240;
const COLOR = {
  rating: "#1f5fa8", edge: "rgba(31, 95, 168, 0.45)", band: "rgba(31, 95, 168, 0.16)",
  floor: "#8a4b00", peak: "#c0001a",
};

function minute(seconds) {
  return new Date(seconds * 1000).toISOString().slice(0, 16).replace("T", " ");
}

/** What is drawn: the changes that leave a rating (a FIDE player off the list has none), in the order they
 * were applied (version). A change whose time is before the one applied before it (a message that came late)
 * is drawn at that one's time: the line keeps the order the rating went through, and ends at the rating now. */
export function seriesOf(history) {
  const points = history.filter((h) => h.after.rating !== null);
  const rating = points.map((h) => h.after.rating);
  let peak = 0;
  rating.forEach((value, i) => { if (value > rating[peak]) peak = i; });
  let latest = -Infinity;
  return {
    x: points.map((h) => (latest = Math.max(latest, Date.parse(h.changed_at) / 1000))),
    rating,
    low: points.some((h) => h.after.rd !== null) ? points.map((h) => h.after.rating - BAND_RDS * h.after.rd) : null,
    high: points.some((h) => h.after.rd !== null) ? points.map((h) => h.after.rating + BAND_RDS * h.after.rd) : null,
    floor: points.some((h) => h.floor !== null) ? points.map((h) => h.floor) : null,
    peak,
  };
}

function summary(s) {
  const first = s.x.length - 1 ? `from ${minute(s.x[0])} to ${minute(s.x.at(-1))}` : `on ${minute(s.x[0])}`;
  const floor = s.floor && s.floor.at(-1) !== null ? `; floor ${whole(s.floor.at(-1))}` : "";
  return `${s.x.length} ${s.x.length === 1 ? "change" : "changes"} ${first}: ${whole(s.rating[0])} to ` +
    `${whole(s.rating.at(-1))}; peak ${whole(s.rating[s.peak])} on ${minute(s.x[s.peak])}${floor}.`;
}

/** The time axis: the changes' span and a margin of 2 % on each side (an hour at least), so that the first
 * and last changes, and a lone one, are drawn whole rather than cut by the plot's edge. */
function timeRange(s) {
  const margin = Math.max((s.x.at(-1) - s.x[0]) * 0.02, 3600);
  return [s.x[0] - margin, s.x.at(-1) + margin];
}

function options(s, width) {
  const stepped = uPlot.paths.stepped({align: 1});
  const series = [
    {label: "time (UTC)", value: (u, v) => (v === null ? "–" : minute(v))},
    {label: "rating", stroke: COLOR.rating, width: 2, paths: stepped, points: {show: s.x.length === 1},
     value: (u, v) => whole(v)},
  ];
  const data = [s.x, s.rating];
  const bands = [];
  if (s.low) {
    const band = {stroke: COLOR.edge, width: 1, paths: stepped, points: {show: false}, value: (u, v) => whole(v)};
    series.push({...band, label: `− ${BAND_RDS} RD`}, {...band, label: `+ ${BAND_RDS} RD`});
    data.push(s.low, s.high);
    bands.push({series: [3, 2], fill: COLOR.band});
  }
  if (s.floor) {
    series.push({label: "floor", stroke: COLOR.floor, width: 1.5, dash: [6, 4], paths: stepped,
                 points: {show: false}, value: (u, v) => whole(v)});
    data.push(s.floor);
  }
  series.push({label: "peak", stroke: COLOR.peak, paths: () => null, value: (u, v) => whole(v),
               points: {show: true, size: 10, width: 1, fill: COLOR.peak, stroke: COLOR.peak}});
  data.push(s.x.map((_, i) => (i === s.peak ? s.rating[i] : null)));
  return {
    opts: {
      width, height: HEIGHT, series, bands,
      // uPlot asks the range of its data's extent when it fits the chart to the data, else a zoom's range
      scales: {x: {time: true, range: (u, min, max) => (min === s.x[0] && max === s.x.at(-1) ? timeRange(s)
        : [min, max])}},
      tzDate: (seconds) => uPlot.tzDate(new Date(seconds * 1000), "Etc/UTC"),
      cursor: {drag: {x: true, y: false}},
      axes: [{}, {size: 52}],
    },
    data,
  };
}

function zoom(u, factor, [first, last]) {
  const {min, max} = u.scales.x;
  const middle = (min + max) / 2;
  const half = Math.max(((max - min) / 2) * factor, 60);
  u.setScale("x", {min: Math.max(first, middle - half), max: Math.min(last, middle + half)});
}

/** A figure for one rating in `into`: its heading, summary, zoom buttons and chart; returns the uPlot. */
export function drawChart(into, title, history) {
  const s = seriesOf(history);
  const heading = el("h3", {text: title});
  if (s.x.length === 0) {
    into.append(heading, el("p", {class: "muted", text: "No rating yet."}));
    return null;
  }
  const plot = el("div", {class: "plot"});
  const figure = el("figure", {class: "chart"}, el("figcaption", {}, heading, el("p", {text: summary(s)})), plot);
  into.append(figure);
  const {opts, data} = options(s, plot.clientWidth);
  const u = new uPlot(opts, data, plot);
  const wrap = u.root.querySelector(".u-wrap");
  wrap.setAttribute("role", "img");
  wrap.setAttribute("aria-label", `${title}: ${summary(s)}`);
  const tools = el("div", {class: "chart-tools", role: "group", "aria-label": `${title}: zoom`});
  for (const [text, action] of [["Zoom in", () => zoom(u, 0.5, timeRange(s))], ["Zoom out", () => zoom(u, 2, timeRange(s))],
    ["Show all", () => u.setData(u.data, true)]]) {
    const b = el("button", {type: "button", text});
    b.addEventListener("click", action);
    tools.append(b);
  }
  figure.insertBefore(tools, plot);
  new ResizeObserver(() => u.setSize({width: plot.clientWidth, height: HEIGHT})).observe(plot);
  return u;
}
