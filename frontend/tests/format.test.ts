import { describe, expect, it } from "vitest";
import { count, fmtMs, fmtNum, fmtSci, plural } from "../src/format";

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
  it("counts in the singular for one, the plural otherwise", () => {
    expect(count(1, "node")).toBe("1 node");
    expect(count(0, "buffer")).toBe("0 buffers");
    expect(count(2, "kernel")).toBe("2 kernels");
    expect(count(1, "pass", "passes")).toBe("1 pass");
    expect(count(3, "pass", "passes")).toBe("3 passes");
    expect(plural(1, "input")).toBe("input");
  });
});
