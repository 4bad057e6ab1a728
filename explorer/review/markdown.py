"""Comment bodies: Markdown rendered to safe HTML on the server.

markdown-it-py (CommonMark) renders with raw HTML turned off, so any `<script>` or `<img onerror>`
a user writes comes out as text; nh3 (the Ammonia sanitizer) then keeps only the tags and attributes
below and `http`/`https`/`mailto` links, as a second line of defence. The browser inserts only this
output as HTML.
"""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table").enable("strikethrough")

TAGS = {"p", "br", "hr", "strong", "em", "del", "code", "pre", "blockquote", "ul", "ol", "li", "a",
        "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td"}
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"style"}, "td": {"style"}}


def render(body: str) -> str:
    """Safe HTML for a Markdown body (links open nothing but http, https and mailto)."""
    html = _md.render(body)
    return nh3.clean(html, tags=TAGS, attributes=ATTRIBUTES, url_schemes={"http", "https", "mailto"},
                     link_rel="noopener noreferrer nofollow", filter_style_properties={"text-align"})
