import { describe, expect, it } from "vitest";
import { fmtMs, fmtNum, fmtSci } from "../src/format";

describe("format", () => {
  it("keeps sub-10 µs times readable", () => {
    expect(fmtMs(0.00021)).toBe("0.21 µs");
    expect(fmtMs(0.04)).toBe("40 µs");
    expect(fmtMs(2.5)).toBe("2.50 ms");
  });
  it("shows a dash for a missing (null) number", () => {
    expect(fmtMs(null)).toBe("–");
    expect(fmtNum(null)).toBe("–");
    expect(fmtSci(null)).toBe("–");
  });
});
