/**
 * The usage chart: stacked bars per day, a colour per model, drawn by uPlot, which is loaded only
 * when a chart is first drawn (never in the tab's initial JavaScript; tests/e2e/initial-js-budget
 * keeps that within its budget). The colours and the axes' ink come from the page's CSS variables,
 * so the chart follows the light and dark themes; `draw` again after a theme change. The chart is a
 * picture for sighted readers: the same figures are in the table beside it.
 */
import type uPlot from "uplot";
import { stacked, type UsageChartData } from "./usage-history.ts";

/** Distinct in light and dark (Okabe-Ito, colour-blind safe), the costliest model first. */
const PALETTE = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#999999"];
export const seriesColour = (i: number) => PALETTE[i % PALETTE.length]!;

let loaded: Promise<typeof uPlot> | undefined;
/** uPlot and its stylesheet, loaded once, on first use. */
function library(): Promise<typeof uPlot> {
  loaded ??= Promise.all([import("uplot"), import("uplot/dist/uPlot.min.css")]).then(([m]) => m.default);
  return loaded;
}

export interface ChartOptions {
  /** Which figure: tokens or US dollars. */
  readonly measure: "tokens" | "cost";
  readonly width: number;
  readonly height: number;
}

/**
 * A CSS colour variable as the canvas can use it: the variables are `light-dark(...)` pairs, which
 * only a property's computed value resolves, so a probe element's colour is read.
 */
function ink(el: HTMLElement, name: string, fallback: string): string {
  const probe = document.createElement("span");
  probe.style.color = `var(${name}, ${fallback})`;
  el.append(probe);
  const colour = getComputedStyle(probe).color;
  probe.remove();
  return colour || fallback;
}

/** "Mar 29" for a `YYYY-MM-DD` day (a calendar day: read as UTC, so no zone moves it). */
const dayLabel = (day: string) =>
  new Date(`${day}T00:00:00Z`).toLocaleDateString(undefined, {
    month: "short",
    day: "numeric",
    timeZone: "UTC",
  });

/** Draw `data` into `el` (replacing what was there); the chart, to resize or destroy. */
export async function drawUsageChart(
  el: HTMLElement,
  data: UsageChartData,
  options: ChartOptions,
): Promise<uPlot> {
  const UPlot = await library();
  const fg = ink(el, "--muted", "#666");
  const grid = ink(el, "--border", "#ddd");
  const values = data.series.map((s) => (options.measure === "tokens" ? [...s.tokens] : [...s.cost]));
  // Stacked: each series' bar reaches the sum of it and those before it; drawn last first, so
  // each lower part is painted over the taller bar behind it.
  const tops = stacked(values);
  const bars = UPlot.paths.bars!({ size: [0.7, 48], align: 0 });
  const format = (v: number) => {
    if (v === 0) return options.measure === "cost" ? "$0" : "0";
    if (options.measure === "tokens")
      return v >= 1000 ? `${Math.round(v / 100) / 10}k` : String(Math.round(v));
    // A cheap model's day costs fractions of a cent: one significant digit says it.
    return `$${v >= 1 ? v.toFixed(0) : v >= 0.01 ? v.toFixed(2) : Number(v.toPrecision(1))}`;
  };
  const chart = new UPlot(
    {
      width: options.width,
      height: options.height,
      legend: { show: false },
      cursor: { show: false },
      // x is the day's index: a bar per day, never a time of day.
      scales: {
        x: { time: false, range: () => [-0.5, data.days.length - 0.5] },
        y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
      },
      axes: [
        {
          stroke: fg,
          grid: { show: false },
          ticks: { stroke: grid },
          incrs: [1, 2, 7, 14, 30, 61, 91],
          values: (_u, splits) =>
            splits.map((i) => (Number.isInteger(i) && data.days[i] ? dayLabel(data.days[i]) : "")),
          space: 56,
        },
        {
          stroke: fg,
          grid: { stroke: grid, width: 1 },
          ticks: { stroke: grid },
          values: (_u, splits) => splits.map(format),
          // As wide as its longest label ("$0.000003" is wider than "60").
          size: (_u, labels) => 16 + 7.5 * Math.max(2, ...(labels ?? []).map((l) => String(l).length)),
        },
      ],
      series: [
        {},
        ...data.series
          .map((s, i) => ({
            label: s.model,
            stroke: seriesColour(i),
            fill: seriesColour(i),
            paths: bars,
            points: { show: false },
            // No outline: a day without spend draws nothing at all on the baseline.
            width: 0,
          }))
          .reverse(),
      ],
    },
    [data.days.map((_, i) => i), ...tops.reverse()] as uPlot.AlignedData,
    el,
  );
  return chart;
}
