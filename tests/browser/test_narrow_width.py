"""What a fresh user found in real Chromium (issues 15/17 area), each checked against the real stack:

- at a phone's width (390 CSS px, mobile emulation honouring the page's viewport meta) no view of a
  compilation is wider than the window: tables and code scroll inside their own boxes, the header wraps;
- the pass timeline keeps each pass name on one line, never cut (a name too long for any width would end
  in "…" with the whole name as its title);
- "not found" pages (an unknown address, an unknown compilation id, a compare page with one) have the
  app's header and say what was not found, with a link home;
- a reload of a finished compilation never shows "Downloads are offered once the compilation has ended";
- no text is an emoji (Debian's Chromium without an emoji font draws boxes) and every button has a name.

The model has the long, slash-separated node names PyTorch's exporter writes, so node, group and kernel
names are long unbroken strings. Screenshots under test-artifacts/browser/ (narrow-*.png).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from browserkit import shot
from onnx import TensorProto, helper, numpy_helper

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

PHONE = {"width": 390, "height": 844}

# Document wider than the window, and the widest elements that stick out past its right edge (to say what).
OVERFLOW = """() => {
  const w = document.documentElement.clientWidth;
  const wide = [...document.querySelectorAll('body *')].filter(e => {
    const r = e.getBoundingClientRect();
    if (!(r.width > 0 && r.right > w + 0.5) || getComputedStyle(e).position === 'fixed') return false;
    for (let p = e.parentElement; p && p !== document.body; p = p.parentElement)
      if (['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(p).overflowX)) return false;  // clipped in its box
    return true;
  }).filter(e => !e.parentElement || e.parentElement.getBoundingClientRect().right <= w + 0.5)
    .slice(0, 5).map(e => `${e.tagName.toLowerCase()}.${[...e.classList].join('.')} right=${Math.round(e.getBoundingClientRect().right)}`);
  return {scroll: document.documentElement.scrollWidth, body: document.body.scrollWidth, inner: window.innerWidth, client: w, wide};
}"""

# Pass names drawn on more than one line, or cut without their whole name in the title.
NAME_DEFECTS = """() => [...document.querySelectorAll('.timeline-row .pass-name')].map(e => {
  const lh = parseFloat(getComputedStyle(e).lineHeight);
  return {name: e.textContent, lines: Math.round(e.getBoundingClientRect().height / lh),
          cut: e.scrollWidth > e.clientWidth + 1, title: e.title};
}).filter(n => n.lines > 1 || (n.cut && !n.title.startsWith(n.name)))"""

# In each code viewer, how far (px) its first line numbers sit from their lines, where more than 1 px
# (the phone's layout must leave CodeMirror's gutter level with its text).
GUTTER_OFFSETS = """() => [...document.querySelectorAll('.cm-editor')].filter(ed => !ed.closest('.cm-mergeView')).flatMap(ed => {
  const nums = [...ed.querySelectorAll('.cm-lineNumbers .cm-gutterElement')]
    .filter(g => /^\\d+$/.test(g.textContent) && getComputedStyle(g).visibility !== 'hidden' && g.getBoundingClientRect().height > 0);
  const lines = [...ed.querySelectorAll('.cm-content > .cm-line')];
  return nums.slice(0, 8).map((g, i) => lines[i] ? Math.round(g.getBoundingClientRect().top - lines[i].getBoundingClientRect().top) : 0)
    .filter(d => Math.abs(d) > 1);
})"""

# Characters outside the Basic Multilingual Plane (emoji: U+1F300.., U+1F900..) in the page's text, and
# buttons with no accessible name (no text, aria-label or title).
GLYPH_DEFECTS = """() => {
  const astral = [...document.body.innerText].filter(c => c.codePointAt(0) > 0xFFFF);
  const unnamed = [...document.querySelectorAll('button, [role=button]')].filter(b =>
    !(b.textContent.trim() || b.getAttribute('aria-label') || b.getAttribute('title'))).map(b => b.outerHTML.slice(0, 120));
  const iconOnly = [...document.querySelectorAll('button')].filter(b => !b.textContent.trim() && b.querySelector('svg.icon'))
    .map(b => ({label: b.getAttribute('aria-label'), w: b.querySelector('svg.icon').getBoundingClientRect().width}));
  return {astral: [...new Set(astral)], unnamed, iconOnly};
}"""


def exported_convnet(path: Path) -> Path:
    """Conv -> Relu -> Add(constant) -> MaxPool -> Flatten -> Gemm on x[1, 3, 32, 32], opset 17, node
    names as PyTorch writes them ("/backbone/stage_1/block_1/conv/Conv", ...), weights seeded."""
    rng = np.random.default_rng(0)

    def init(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    prefix = "/backbone/stage_1/block_1_with_squeeze_and_excitation_residual"
    inits = [init("conv.weight", (8, 3, 3, 3)), init("conv.bias", (8,)), init("shift", (1, 8, 1, 1)),
             init("fc.weight", (10, 8 * 16 * 16)), init("fc.bias", (10,))]
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], name=f"{prefix}/conv/Conv", kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["c"], ["r"], name=f"{prefix}/activation/Relu"),
        helper.make_node("Add", ["r", "shift"], ["a"], name=f"{prefix}/shift/Add"),
        helper.make_node("MaxPool", ["a"], ["p"], name=f"{prefix}/downsample/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="/head/classifier_with_a_long_exported_name/Flatten"),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits_of_the_classifier_head"], name="/head/classifier_with_a_long_exported_name/fc/Gemm", transB=1),
    ]
    graph = helper.make_graph(nodes, "main_graph", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("logits_of_the_classifier_head", TensorProto.FLOAT, [1, 10])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def compiled(stack, tmp_path_factory):
    """A finished O2 compilation of the exported-names convnet: (id, a kernel name, a node name)."""
    path = exported_convnet(tmp_path_factory.mktemp("narrow") / "exported_convnet_with_a_long_file_name.onnx")
    comp = stack.compile(stack.upload(path)["id"], pipeline="O2")
    assert stack.wait_finished(comp["id"])["status"] == "succeeded"
    events = stack.stored_events(comp["id"], -1)
    kernel = next(e["kernel"] for e in events if e["type"] == "kernel.lowered")
    return comp["id"], kernel, onnx.load(path).graph.node[0].name


@pytest.fixture
def phone(browser):
    ctx = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    ctx.close()
    assert not errors, f"uncaught errors in the page: {errors}"


def _overflow(page, what: str) -> str | None:
    """Why the page is wider than the phone's window, or None. With mobile emulation Chromium zooms a
    page that overflows out until it fits (innerWidth grows), so the window's width is checked too."""
    o = page.evaluate(OVERFLOW)
    if o["inner"] == o["client"] == PHONE["width"] and o["scroll"] <= o["inner"] and o["body"] <= o["inner"]:
        return None
    return f"{what} is wider than the window ({o['scroll']} > {PHONE['width']} px): {o['wide']}"


def _fits(page, what: str) -> None:
    why = _overflow(page, what)
    assert why is None, why


def test_every_view_of_a_compilation_fits_a_phone(stack, phone, compiled):
    cid, kernel, node = compiled
    views = [
        ("summary", f"/c/{cid}", ".summary .downloads .artifact-list"),
        ("passes", f"/c/{cid}/pass/0", ".ir-pane .cm-content"),
        ("pass-diff", f"/c/{cid}/pass/1?diff=1", ".ir-pane .cm-mergeView"),
        ("kernels", f"/c/{cid}/kernels", ".kernels-table tbody tr"),
        ("kernel", f"/c/{cid}/kernel/{kernel}?tab=asm", ".kernel-detail .cm-content"),
        ("graph", f"/c/{cid}/graph?node={node}", ".graph-svg .gnode"),
        ("remarks", f"/c/{cid}/remarks", ".remarks-list"),
    ]
    problems = []
    for i, (name, url, ready) in enumerate(views):
        phone.goto(stack.url + url)
        phone.wait_for_selector(ready)
        phone.wait_for_selector(".status-badge.succeeded")
        phone.wait_for_timeout(300)  # a frame or two for late layout (CodeMirror measures, the graph lays out)
        shot(phone, f"narrow-{i + 1:02d}-{name}")
        problems.append(_overflow(phone, f"{name} (/c/<id>{url.split(cid, 1)[1]})"))
        header = phone.evaluate("(() => { const h = document.querySelector('.page-header'); return [h.scrollWidth, h.clientWidth]; })()")
        if header[0] > header[1]:
            problems.append(f"{name}: the header's items overflow it instead of wrapping: {header}")
        # code below the fold: CodeMirror measures its lines once they scroll into view (as a user's would)
        if phone.locator(".cm-editor").count():
            phone.locator(".cm-editor").first.scroll_into_view_if_needed()
            phone.wait_for_timeout(200)
        if off := phone.evaluate(GUTTER_OFFSETS):
            problems.append(f"{name}: line numbers not level with their lines (px off, first lines): {off}")
        if cramped := phone.evaluate(NAME_DEFECTS):
            problems.append(f"{name}: pass names on more than one line or cut: {cramped}")
    problems = [p for p in problems if p]
    assert not problems, "\n".join(problems)
    # a table too wide for a phone scrolls inside its own box, the page does not
    phone.goto(f"{stack.url}/c/{cid}/kernels")
    phone.wait_for_selector(".kernels-table tbody tr")
    box = phone.evaluate("(() => { const t = document.querySelector('.kernels-table'); return [t.scrollWidth, t.clientWidth, getComputedStyle(t).overflowX]; })()")
    assert box[0] <= box[1] or box[2] in ("auto", "scroll"), box


def test_pass_names_stay_on_one_line_and_whole(stack, page, compiled):
    cid, _, _ = compiled
    for width in (1400, 1000, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{stack.url}/c/{cid}/pass/0")
        page.wait_for_selector(".timeline-row[data-index] .pass-name")
        names = page.evaluate("() => [...document.querySelectorAll('.timeline-row[data-index] .pass-name')].map(e => [e.textContent, e.scrollWidth <= e.clientWidth + 1])")
        assert len(names) >= 5 and all(whole for _, whole in names), (width, names)
        assert page.evaluate(NAME_DEFECTS) == [], width
    # a name longer than any row: one line, cut with "…", the whole name in its title
    page.evaluate("""() => { const e = document.querySelector('.timeline-row[data-index] .pass-name');
      e.textContent = 'a-pass-name-far-longer-than-any-real-one-'.repeat(4); e.title = e.textContent; }""")
    long = page.evaluate("""() => { const e = document.querySelector('.timeline-row[data-index] .pass-name');
      return [e.scrollWidth > e.clientWidth, getComputedStyle(e).textOverflow, Math.round(e.getBoundingClientRect().height / parseFloat(getComputedStyle(e).lineHeight))]; }""")
    assert long == [True, "ellipsis", 1], long
    shot(page, "narrow-08-timeline")


def test_not_found_pages_have_the_header_and_say_what(stack, phone, compiled):
    cid, _, _ = compiled
    cases = [
        ("/no/such/page", "Not found: the page /no/such/page", 404),
        ("/c/nosuchid0/kernels", "Not found: compilation “nosuchid0”", 404),
        (f"/compare/{cid}...nosuchid1", "Not found: compilation “nosuchid1”", 404),
    ]
    for i, (url, words, status) in enumerate(cases):
        response = phone.goto(stack.url + url)
        assert response.status == status, url
        phone.wait_for_selector(".not-found-title")
        assert phone.inner_text(".not-found-title") == words
        # the app's header: the brand (home) and the user menu, above the message
        phone.wait_for_selector(".page-header .user-menu :is(.sign-in, .signed-in)")
        assert phone.locator(".page-header a.brand").get_attribute("href") == "/"
        assert phone.locator(".not-found a.home-link").get_attribute("href") == "/"
        if url.startswith("/c/"):  # nothing to review, link to or compare on the compilation page
            for control in (".review-state", ".copy-link", ".compare-with"):
                assert not phone.locator(f".page-header {control}").is_visible(), control
        if url.startswith(("/c/", "/compare/")) and phone.locator(".page-header .user-menu .sign-in").count():
            # signed out: a sign-in link back here, the same words whether the id is missing or private
            link = phone.wait_for_selector(".not-found-sign-in:not([hidden]) a.sign-in-link")
            assert link.get_attribute("href").startswith("/signin?next=")
        _fits(phone, url)
        shot(phone, f"narrow-{9 + i:02d}-not-found")
    phone.click(".not-found a.home-link")
    phone.wait_for_selector(".start .upload")
    assert phone.url.rstrip("/") == stack.url


def test_a_reload_of_a_finished_compilation_never_says_downloads_come_later(stack, page, compiled):
    cid, _, _ = compiled
    # Every text the downloads card shows, from the first paint on (a MutationObserver installed before
    # the app's script runs).
    page.add_init_script("""window.__downloads = []; new MutationObserver(() => {
        const c = document.querySelector('.summary .downloads'); if (c) window.__downloads.push(c.innerText);
      }).observe(document, {subtree: true, childList: true, characterData: true});""")
    for _ in range(3):  # the first load, then reloads
        page.goto(f"{stack.url}/c/{cid}")
        page.wait_for_selector(".summary .downloads .artifact-list a[download]")
        seen = page.evaluate("window.__downloads")
        assert seen and not any("offered once" in t for t in seen), seen
        page.reload()
        page.wait_for_selector(".summary .downloads .artifact-list a[download]")
        seen = page.evaluate("window.__downloads")
        assert not any("offered once" in t for t in seen), seen


def test_no_emoji_and_every_button_has_a_name(stack, page, compiled):
    cid, kernel, node = compiled
    seen_icon_only = 0
    for url, ready in [(f"/c/{cid}/remarks", ".remark .comment-remark"), (f"/c/{cid}/kernels", ".comment-kernel-row"),
                       (f"/c/{cid}/kernel/{kernel}", ".comment-kernel"), (f"/c/{cid}/pass/1", ".comment-pass"),
                       (f"/c/{cid}/graph?node={node}", ".comment-node"), ("/", ".upload")]:
        page.goto(stack.url + url)
        page.wait_for_selector(ready)
        d = page.evaluate(GLYPH_DEFECTS)
        assert d["astral"] == [] and d["unnamed"] == [], (url, d)
        # an icon-only button says in words what it does and its icon is drawn
        assert all(b["label"] and b["w"] > 4 for b in d["iconOnly"]), (url, d["iconOnly"])
        seen_icon_only += len(d["iconOnly"])
    assert seen_icon_only > 0  # the remarks' and the kernel rows' comment buttons
