// @vitest-environment happy-dom
/** The downloads card: the main artifacts first (reproducer, report, traces, ...), the per-pass models folded, what is missing and why. */
import { describe, expect, it } from "vitest";
import { downloadsBody } from "../src/panes/downloads";

const a = (name: string, kind: string) => ({ name, kind, media_type: "x", description: `${kind} file`, url: `/api/compilations/c/artifacts/${name}` });

describe("downloads", () => {
  it("lists the artifacts as download links, per-pass models folded, and says why the others are missing", () => {
    const el = downloadsBody({
      artifacts: [a("report.json", "report"), a("pass-0-fold-constants.onnx", "model"), a("module.o", "object"), a("reproducer.zip", "reproducer"), a("trace.json", "trace")],
      missing: { "module.so": "aarch64 is a cross target: this server links no shared object for it" },
    });
    const top = [...el.querySelectorAll(":scope > .artifact-list a")];
    expect(top.map((x) => x.getAttribute("download"))).toEqual(["reproducer.zip", "report.json", "trace.json", "module.o"]);
    expect(top[1].getAttribute("href")).toBe("/api/compilations/c/artifacts/report.json");
    expect([...el.querySelectorAll(".pass-models a")].map((x) => x.textContent)).toEqual(["pass-0-fold-constants.onnx"]);
    expect(el.querySelector("[data-missing='module.so']")?.textContent).toBe("No module.so: aarch64 is a cross target: this server links no shared object for it.");
  });
});
