import { describe, expect, it } from "vitest";
import { HEAT_BANDS, heatBand, timeShares } from "../src/graph/heat";

describe("time on the graph", () => {
  it("gives each timed kernel its share of the total and a band by threshold", () => {
    const shares = timeShares(new Map([["a", 600], ["b", 300], ["c", 60], ["d", 40]]));
    expect([...shares]).toEqual([["a", 0.6], ["b", 0.3], ["c", 0.06], ["d", 0.04]]);
    expect(["a", "b", "c", "d"].map((k) => heatBand(shares.get(k))?.label)).toEqual(["≥ 20%", "≥ 20%", "5–10%", "1–5%"]);
    expect(heatBand(0.1)?.label).toBe("10–20%"); // a threshold belongs to the band above it
    expect(heatBand(0.0099)?.label).toBe("< 1%");
    expect(heatBand(undefined)).toBeNull();
    expect(timeShares(new Map()).size).toBe(0);
    expect(HEAT_BANDS.map((b) => b.min)).toEqual([...HEAT_BANDS.map((b) => b.min)].sort((x, y) => y - x));
  });
});
