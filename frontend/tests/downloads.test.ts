// @vitest-environment happy-dom
/** The downloads card: the main artifacts first (reproducer, report, traces, ...), the per-pass models folded, what is missing and why;
 * nothing said before the compilation's phase is known (a reload of a finished one never says "offered once it has ended"). */
import { describe, expect, it, vi } from "vitest";
import { api } from "../src/api";
import { downloadPhase, downloadsBody, downloadsCard } from "../src/panes/downloads";

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

describe("downloads phase", () => {
  it("is ended once the events or the record say so, running while the record says so, else unknown", () => {
    expect(downloadPhase(true, undefined)).toBe("ended");
    expect(downloadPhase(false, "succeeded")).toBe("ended");
    expect(downloadPhase(false, "failed")).toBe("ended");
    expect(downloadPhase(true, "running")).toBe("ended"); // the events are ahead of a record read earlier
    expect(downloadPhase(false, "queued")).toBe("running");
    expect(downloadPhase(false, "running")).toBe("running");
    expect(downloadPhase(false, undefined)).toBe("unknown"); // a reload: neither has arrived yet
  });

  it("says nothing until the phase is known, 'offered once ... ended' only while it runs, lists once when ended", async () => {
    const listing = { artifacts: [a("report.json", "report")], missing: {} };
    const spy = vi.spyOn(api, "artifacts").mockResolvedValue(listing);
    const card = downloadsCard("c1");
    card.update("unknown");
    expect(card.el.textContent).toBe("Downloads");
    card.update("running");
    expect(card.el.textContent).toContain("Downloads are offered once the compilation has ended.");
    expect(spy).not.toHaveBeenCalled();
    card.update("ended");
    card.update("ended");
    await Promise.resolve();
    await Promise.resolve();
    expect(spy).toHaveBeenCalledTimes(1);
    expect([...card.el.querySelectorAll("a[download]")].map((x) => x.textContent)).toEqual(["report.json"]);
    card.update("running"); // a stale record read never takes the list back
    expect(card.el.textContent).not.toContain("offered once");
    // a reload of a finished compilation: unknown, then ended, never the "offered once" line
    const reload = downloadsCard("c1");
    const seen: string[] = [];
    for (const p of ["unknown", "unknown", "ended"] as const) {
      reload.update(p);
      seen.push(reload.el.textContent ?? "");
    }
    expect(seen.some((t) => t.includes("offered once"))).toBe(false);
    spy.mockRestore();
  });
});
